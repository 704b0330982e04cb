#!/usr/bin/env bash
# python_check.sh -- which Python interpreter the Makefile builds a virtual environment with.
#
# The supported range is read from one place, python_requires in setup.py (">=3.A,<3.B"),
# so the Makefile, pip and this script always agree.  Every check runs the interpreter
# (`PY -c 'import sys; ...'`, at most 20 s): a name that exists but does not run -- such
# as a pyenv shim for a version that is not selected -- is no interpreter.
#
# Usage:
#   python_check.sh --given PY [--venv DIR] [--goal GOAL]
#       PY was chosen by the user (make ... PYTHON=PY): print PY if it is a supported Python,
#       else say why and which ones are, and exit 1.  With --venv, also refuse when DIR
#       already holds a virtual environment of another Python version (it would be used
#       instead of PY).
#   python_check.sh --default PY [--goal GOAL]
#       PY is the default (python3): print it if it is supported; else print the newest
#       supported python3.X on PATH, saying so on stderr; else say which versions are
#       supported and exit 1.
#   python_check.sh --find X.Y
#       print a working Python X.Y: pythonX.Y on PATH, else pyenv's newest X.Y.*
#       (`pyenv root`, $PYENV_ROOT, ~/.pyenv, /root/.pyenv); exit 1 saying where it looked.
#   python_check.sh --supported
#       print the supported versions (X.Y), one a line.
# GOAL (default demo) is the make target named in the advice ("make GOAL PYTHON=...").
# Only the chosen interpreter goes to stdout; everything else goes to stderr.
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PROBE_S=${PYTHON_CHECK_TIMEOUT:-20}

die() {
  echo "$*" >&2
  exit 1
}

# The supported X.Y versions, from setup.py's python_requires.
spec=$(sed -n 's/^[[:space:]]*python_requires="\([^"]*\)",\{0,1\}[[:space:]]*$/\1/p' "$ROOT/setup.py")
if [[ ! $spec =~ ^\>=3\.([0-9]+),\<3\.([0-9]+)$ ]]; then
  die "python_check.sh: cannot read python_requires (\">=3.A,<3.B\") from $ROOT/setup.py (found: '$spec')"
fi
LO=${BASH_REMATCH[1]}
HI=${BASH_REMATCH[2]} # exclusive
SUPPORTED=()
for ((m = LO; m < HI; m++)); do SUPPORTED+=("3.$m"); done
# "3.10, 3.11 or 3.12"
if [ ${#SUPPORTED[@]} -eq 1 ]; then
  SUPPORTED_TEXT=${SUPPORTED[0]}
else
  SUPPORTED_TEXT=$(printf '%s, ' "${SUPPORTED[@]:0:${#SUPPORTED[@]}-1}")
  SUPPORTED_TEXT="${SUPPORTED_TEXT%, } or ${SUPPORTED[${#SUPPORTED[@]}-1]}"
fi

# bounded COMMAND...: run it, for at most PROBE_S seconds where coreutils' timeout exists.
bounded() {
  if command -v timeout >/dev/null; then timeout "$PROBE_S" "$@"; else "$@"; fi
}

# probe PY: print its version (3.12.1) if it runs and answers as a Python does.
probe() {
  local out
  out=$(bounded "$1" -c 'import sys; print("%d.%d.%d" % sys.version_info[:3])' 2>/dev/null) || return 1
  [[ $out =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || return 1
  echo "$out"
}

# is_supported 3.12.1
is_supported() {
  local v
  for v in "${SUPPORTED[@]}"; do
    [[ $1 == "$v".* ]] && return 0
  done
  return 1
}

# why_not 3.13.0: one line on why that version cannot work.
why_not() {
  local minor=${1#3.}
  minor=${minor%%.*}
  if [[ $1 != 3.* ]]; then
    echo "aesara_bincount is a Python 3 package."
  elif [ "$minor" -ge "$HI" ]; then
    echo "Aesara 2.9 needs numpy < 2, and numpy 1.26, the last numpy 1.x, has no build for Python 3.$HI or newer."
  else
    echo "Python 3.$LO is the oldest version the package is tested with."
  fi
}

# find_version X.Y: print a working Python X.Y: its name if it is on PATH, else the path of pyenv's.
find_version() {
  local want=$1 cand v root roots=()
  if command -v "python$want" >/dev/null && v=$(probe "python$want") && [[ $v == "$want".* ]]; then
    echo "python$want"
    return 0
  fi
  command -v pyenv >/dev/null && root=$(pyenv root 2>/dev/null) && roots+=("$root")
  roots+=("${PYENV_ROOT:-}" "${HOME:-}/.pyenv" /root/.pyenv)
  for root in "${roots[@]}"; do
    [ -n "$root" ] && [ -d "$root/versions" ] || continue
    # Newest patch release first (3.12.10 before 3.12.9).
    for cand in $(cd "$root/versions" && ls -d "$want".* 2>/dev/null | sort -t. -k3,3nr); do
      cand=$root/versions/$cand/bin/python$want
      if [ -x "$cand" ] && v=$(probe "$cand") && [[ $v == "$want".* ]]; then
        echo "$cand"
        return 0
      fi
    done
  done
  return 1
}

# advise PY LABEL VERSION GOAL: the message for an interpreter PY (named LABEL) of
# VERSION (empty: it does not run) that will not do; exits 1.
advise() {
  local py=$1 label=$2 version=$3 goal=$4 v found said newest=${SUPPORTED[${#SUPPORTED[@]}-1]}
  {
    if [ -n "$version" ]; then
      echo "$label is Python $version; aesara_bincount needs Python $SUPPORTED_TEXT."
      why_not "$version"
    else
      echo "$label does not run (or is not a Python interpreter); aesara_bincount needs Python $SUPPORTED_TEXT."
      said=$(bounded "$py" -c pass 2>&1 </dev/null | head -n 1)
      [ -z "$said" ] || echo "It says: $said"
    fi
    echo "Choose a supported interpreter with PYTHON, for example:"
    echo "    make $goal PYTHON=python$newest"
    for ((i = ${#SUPPORTED[@]} - 1; i >= 0; i--)); do
      v=${SUPPORTED[i]}
      if found=$(find_version "$v"); then
        echo "Python $v is here:  make $goal PYTHON=$found"
      fi
    done
  } >&2
  exit 1
}

MODE=""
PY=""
VENV=""
GOAL=demo
while [ $# -gt 0 ]; do
  case "$1" in
    --given | --default | --find) MODE=$1; PY=${2:-}; shift 2 || die "$1 needs a value" ;;
    --supported) MODE=$1; shift ;;
    --venv) VENV=${2:-}; shift 2 || die "--venv needs a value" ;;
    --goal) GOAL=${2:-demo}; shift 2 || die "--goal needs a value" ;;
    *) die "usage: $0 --given PY [--venv DIR] [--goal GOAL] | --default PY [--goal GOAL] | --find X.Y | --supported" ;;
  esac
done

case "$MODE" in
  --supported)
    printf '%s\n' "${SUPPORTED[@]}"
    ;;
  --find)
    [[ $PY =~ ^3\.[0-9]+$ ]] || die "--find needs a version X.Y, not '$PY'"
    find_version "$PY" && exit 0
    die "No working Python $PY here: looked for python$PY on PATH and in pyenv's versions" \
      "(\`pyenv root\`, \$PYENV_ROOT, ~/.pyenv, /root/.pyenv).  Install it (e.g. pyenv install $PY) or put it on PATH."
    ;;
  --given)
    [ -n "$PY" ] || die "PYTHON is empty: name a Python $SUPPORTED_TEXT interpreter, e.g. make $GOAL PYTHON=python3.12"
    version=$(probe "$PY") || advise "$PY" "PYTHON=$PY" "" "$GOAL"
    is_supported "$version" || advise "$PY" "PYTHON=$PY" "$version" "$GOAL"
    if [ -n "$VENV" ] && [ -e "$VENV/bin/python" ]; then
      have=$(probe "$VENV/bin/python") || have="?"
      if [ "${have%.*}" != "${version%.*}" ]; then
        die "$VENV was made with Python $have, but PYTHON=$PY is Python $version: $VENV would be used instead." \
          "Remove it first (make clean), or give this Python a folder of its own: make $GOAL PYTHON=$PY VENV=.venv-${version%.*}"
      fi
    fi
    echo "$PY"
    ;;
  --default)
    if version=$(probe "$PY") && is_supported "$version"; then
      echo "$PY"
      exit 0
    fi
    for ((i = ${#SUPPORTED[@]} - 1; i >= 0; i--)); do
      cand=python${SUPPORTED[i]}
      if command -v "$cand" >/dev/null && v=$(probe "$cand") && is_supported "$v"; then
        if [ -n "$version" ]; then what="is Python $version"; else what="does not run"; fi
        echo "$PY $what; aesara_bincount needs Python $SUPPORTED_TEXT: using $cand (Python $v) instead." \
          "Set PYTHON to choose another." >&2
        echo "$cand"
        exit 0
      fi
    done
    advise "$PY" "$PY" "$version" "$GOAL"
    ;;
  *)
    die "usage: $0 --given PY [--venv DIR] [--goal GOAL] | --default PY [--goal GOAL] | --find X.Y | --supported"
    ;;
esac
