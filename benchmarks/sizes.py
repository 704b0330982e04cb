"""How the benchmark tables write a size (elements of x, bins)."""


def size_text(n: int) -> str:
    """A power of ten from 1000 up as ``1eK``, any other size whole.

    1000000 gives "1e6", 16 gives "16" (``"%.0e"`` would print "2e+01").
    """
    exp = len(str(n)) - 1
    return f"1e{exp}" if exp >= 3 and n == 10**exp else str(n)
