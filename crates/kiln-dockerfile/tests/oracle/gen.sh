#!/usr/bin/env bash
# Regenerate tests/data/dockerignore-oracle.json: for each .dockerignore case, exactly
# what the docker CLI sends as the build context, recorded from the CLI itself.
#
# Method
# ------
# For every case a fresh context directory is built (one of two trees below, a
# `FROM scratch` + `COPY . /ctx/` Dockerfile, the case's .dockerignore), with fixed file
# contents and modes (files 0644 unless stated, directories 0755), and then:
#
# 1. "sent" (always): `DOCKER_BUILDKIT=0 docker build` against tests/oracle/fake_engine.py,
#    a stand-in Engine API on a private unix socket that stores the uploaded request body.
#    With the legacy builder the CLI reads .dockerignore, adds `!Dockerfile` and
#    `!.dockerignore` when they are excluded, and tars the directory with moby's
#    archive.TarWithOptions (patternmatcher inside), so the stored tar is byte for byte
#    what a daemon would receive. Its headers (path, type, mode, size, link target) are
#    recorded in tar order. A case the CLI rejects records the CLI's error instead.
# 2. "image" (when a daemon answers; skip with --no-daemon): the same build on a real
#    dockerd (DOCKER_HOST, or scripts/dev-env), then `docker create` + `docker export |
#    tar t`, recording the non-directory paths under ctx/. This cross-checks the capture
#    end to end; the 20.10 legacy builder also deletes the Dockerfile and .dockerignore
#    from the context when .dockerignore excludes them, so those two may be missing here.
#
# BuildKit (DOCKER_BUILDKIT=1) is not used: CLI 28 needs the buildx plugin for it.
#
# Cases 1-33 are the research trial's pattern files on its 20-file tree; the rest are
# kiln's edge cases on a second tree, the last few built with `-f`.
#
# Usage: tests/oracle/gen.sh [--no-daemon] [OUTPUT]   (run from anywhere)
# Needs: the docker CLI (recorded in the output; 28.2.2 when this was checked in), python3.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
REPO=$(cd "$HERE/../../../.." && pwd -P)
USE_DAEMON=1
if [[ ${1:-} == --no-daemon ]]; then
    USE_DAEMON=0
    shift
fi
OUT=${1:-$HERE/../data/dockerignore-oracle.json}
DOCKER=${DOCKER:-docker}

msg() { printf 'gen.sh: %s\n' "$*" >&2; }

WORK=$(mktemp -d "${TMPDIR:-/tmp}/kiln-ignore-oracle.XXXXXX")
ENGINE_PID=
DAEMON_HOST=
IMAGES=()
cleanup() {
    [[ -z $ENGINE_PID ]] || kill "$ENGINE_PID" 2>/dev/null || true
    if ((${#IMAGES[@]})); then
        DOCKER_HOST=$DAEMON_HOST "$DOCKER" rmi "${IMAGES[@]}" >/dev/null 2>&1 || true
    fi
    rm -rf -- "$WORK"
}
trap cleanup EXIT
umask 022
# A private CLI config: no contexts, credential helpers or plugins of the user's.
export DOCKER_CONFIG=$WORK/docker-config
mkdir -p "$DOCKER_CONFIG" "$WORK/captured" "$WORK/cases"

# ------------------------------------------------------------------ trees

DOCKERFILE=$'FROM scratch\nCOPY . /ctx/\n'

# The 20-file tree of the research trial (shared/research/crates.md §2.6). Every file
# holds its own path and a newline.
RESEARCH_FILES=(
    a.txt b.md README.md docs/x.md docs/keep.md src/main.rs src/lib/mod.rs
    src/lib/test_a.rs node_modules/p/index.js node_modules/p/README.md target/debug/app
    target/keep.txt foo/bar/baz.txt foo/node_modules/q.js x/y/z/deep.tmp tmpfile.tmp c.txt
    d/e.tmp "sp ace/f.txt" .hidden/h.txt
)

make_research_tree() {
    local root=$1 f
    for f in "${RESEARCH_FILES[@]}"; do
        mkdir -p "$root/$(dirname "$f")"
        printf '%s\n' "$f" >"$root/$f"
    done
}

# Edge cases: unicode and spaces, names with glob characters and one-character names
# (which tell Go's reading of `[*]` from a naive one), symlinks (to a file, to a
# directory, dangling, absolute), a hard link, odd modes, an empty directory.
EDGE_FILES=(
    keep.txt "with space.txt" "ünï/çødé.txt" "日本.md" "[x].txt" "a*b.txt" dir/sub/f.txt
    dir/g.md exec.sh ro.txt hard1.txt z "]"
)

make_edge_tree() {
    local root=$1 f
    for f in "${EDGE_FILES[@]}"; do
        mkdir -p "$root/$(dirname "$f")"
        printf '%s\n' "$f" >"$root/$f"
    done
    chmod 0755 "$root/exec.sh"
    chmod 0444 "$root/ro.txt"
    ln "$root/hard1.txt" "$root/hard2.txt"
    mkdir "$root/empty-dir"
    ln -s keep.txt "$root/link-file"
    ln -s dir "$root/link-dir"
    ln -s does-not-exist "$root/dangling"
    ln -s /etc/hostname "$root/abs-link"
    printf '%s' "$DOCKERFILE" >"$root/dir/Dockerfile.alt"
}

# ------------------------------------------------------------------ cases

# The 33 pattern files of the research trial, verbatim.
RESEARCH_CASES=(
    $'*.md\n!README.md'
    $'**/*.md\n!docs/keep.md'
    $'/target\n!target/keep.txt'
    $'node_modules'
    $'**/node_modules'
    $'src/*\n!src/lib\nsrc/lib/test_*'
    $'*\n!src'
    $'**\n!src/**/*.rs'
    $'./foo/../a.txt'
    $'foo/bar/'
    $'*/*.tmp'
    $'**/*.tmp'
    $'[a-b].txt'
    $'x/**/deep.tmp'
    $'!a.txt'
    $'# comment\n   a.txt   \n'
    $'src/lib\n!src/lib/mod.rs'
    $'**/*.rs\n!**/main.rs'
    $'sp ace'
    $'.*'
    $'docs\n!docs/*.md\ndocs/x.md'
    $'**/b*'
    $'*.tmp\n!**/deep.tmp'
    $'target/**\n!target/debug'
    $'[!a].txt'
    $'[^a].txt'
    $'*\\.txt'
    $'t*p*'
    $'**/*.tm?'
    $'src/**'
    $'d?e.tmp'
    $'x/*/z'
    $'sp\\ ace'
)

EDGE_CASES=(
    $'**'
    $'!'
    $'dir/'
    $'dir/sub/'
    $'*.txt\n!ünï/*'
    $'日本.md'
    $'with space.txt'
    $'with\\ space.txt'
    $'\\[x\\].txt'
    $'[[]x].txt'
    $'a\\*b.txt'
    $'link-dir'
    $'link-dir/**'
    $'*\n!dir/sub/f.txt'
    $'**\n!dir/sub'
    $'dir\n!dir/g.md'
    $'Dockerfile\n.dockerignore'
    $'*'
    $'**/*.txt\n!**/f.txt'
    $'[!k]*'
    $'?ir'
    $'\xef\xbb\xbfkeep.txt'
    $'keep.txt\r\ndir\r\n'
    $'/'
    $'..\n../keep.txt'
    $'  # not a comment\n#dir'
    $'empty-dir'
    $'hard1.txt'
    $'*.txt\n!hard2.txt'
    $'[Local-Only]/'
    $'a['
    $'[z-a]*'
    $'[*]'
    $'*/\n!dir/sub/**'
)

# Edge cases built with `-f DOCKERFILE` (path inside the context): "DOCKERFILE|PATTERNS".
EDGE_F_CASES=(
    $'dir/Dockerfile.alt|dir'
    $'dir/Dockerfile.alt|*'
    $'dir/Dockerfile.alt|**/*.alt\n!Dockerfile'
    $'dir/Dockerfile.alt|dir/\n!dir/sub/f.txt'
)

# ------------------------------------------------------------------ tools

command -v "$DOCKER" >/dev/null || { msg "no docker CLI ($DOCKER)"; exit 1; }
command -v python3 >/dev/null || { msg "no python3"; exit 1; }
CLI_VERSION=$("$DOCKER" --version)

ENGINE_SOCK=$WORK/engine.sock
python3 "$HERE/fake_engine.py" "$ENGINE_SOCK" "$WORK/captured" 2>"$WORK/engine.log" &
ENGINE_PID=$!
for _ in $(seq 50); do [[ -S $ENGINE_SOCK ]] && break; sleep 0.1; done
[[ -S $ENGINE_SOCK ]] || { msg "fake engine did not start"; cat "$WORK/engine.log" >&2; exit 1; }

if ((USE_DAEMON)); then
    if [[ -z ${DOCKER_HOST:-} && -x $REPO/scripts/dev-env ]] && "$REPO/scripts/dev-env" status >/dev/null 2>&1; then
        eval "$("$REPO/scripts/dev-env" env)"
    fi
    DAEMON_HOST=${DOCKER_HOST:-unix:///var/run/docker.sock}
    if SERVER=$(DOCKER_HOST=$DAEMON_HOST "$DOCKER" version --format '{{.Server.Version}}' 2>/dev/null); then
        msg "daemon cross-check against $DAEMON_HOST (dockerd $SERVER)"
    else
        DAEMON_HOST=
        msg "no daemon answers; recording the CLI capture only"
    fi
fi

# ------------------------------------------------------------------ run

run_case() {
    local n=$1 tree=$2 text=$3 dockerfile=${4:-}
    local dir=$WORK/cases/$(printf '%03d' "$n")
    local ctx=$dir/ctx
    local fflag=()
    mkdir -p "$ctx"
    if [[ -n $dockerfile ]]; then
        fflag=(-f "$ctx/$dockerfile")
        printf '%s' "$dockerfile" >"$dir/dockerfile"
    fi
    "make_${tree}_tree" "$ctx"
    printf '%s' "$DOCKERFILE" >"$ctx/Dockerfile"
    printf '%s' "$text" >"$ctx/.dockerignore"
    printf '%s' "$tree" >"$dir/tree"
    printf '%s' "$text" >"$dir/dockerignore"

    rm -f "$WORK"/captured/*.tar
    if DOCKER_HOST=unix://$ENGINE_SOCK DOCKER_BUILDKIT=0 "$DOCKER" build -q "${fflag[@]}" "$ctx" \
        >"$dir/cli.out" 2>"$dir/cli.err"; then
        mv "$WORK"/captured/context-*.tar "$dir/sent.tar"
    else
        echo "$?" >"$dir/cli.rc"
    fi

    if [[ -n $DAEMON_HOST && -e $dir/sent.tar ]]; then
        local tag cid
        # Tagged, so that a concurrent `docker image prune` cannot take it mid-case.
        tag=kiln-ignore-oracle:$$-$n
        if DOCKER_HOST=$DAEMON_HOST DOCKER_BUILDKIT=0 "$DOCKER" build -q -t "$tag" "${fflag[@]}" "$ctx" \
            >/dev/null 2>"$dir/daemon.err"; then
            IMAGES+=("$tag")
            cid=$(DOCKER_HOST=$DAEMON_HOST "$DOCKER" create "$tag" /none 2>/dev/null)
            DOCKER_HOST=$DAEMON_HOST "$DOCKER" export "$cid" | tar -t >"$dir/image.txt"
            DOCKER_HOST=$DAEMON_HOST "$DOCKER" rm "$cid" >/dev/null
        else
            msg "case $n: the daemon build failed: $(cat "$dir/daemon.err")"
        fi
    fi
    # The tree spec is taken from the first context of each tree (builds never write to it).
    [[ -e $WORK/spec-$tree ]] || cp -a "$ctx" "$WORK/spec-$tree"
}

n=0
for text in "${RESEARCH_CASES[@]}"; do
    n=$((n + 1))
    run_case "$n" research "$text"
done
for text in "${EDGE_CASES[@]}"; do
    n=$((n + 1))
    run_case "$n" edge "$text"
done
for pair in "${EDGE_F_CASES[@]}"; do
    n=$((n + 1))
    run_case "$n" edge "${pair#*|}" "${pair%%|*}"
done
msg "$n cases run"

# ------------------------------------------------------------------ assemble

python3 - "$WORK" "$OUT" "$CLI_VERSION" "$DAEMON_HOST" <<'PY'
import json, os, stat, sys, tarfile

work, out, cli_version, daemon = sys.argv[1:5]

def tree_spec(root):
    """Every entry of a context tree, parents first, names in byte order."""
    entries, inodes = [], {}
    def walk(rel):
        full = os.path.join(root, rel) if rel else root
        for name in sorted(os.listdir(full), key=os.fsencode):
            path = f"{rel}/{name}" if rel else name
            if path == ".dockerignore":
                continue
            st = os.lstat(os.path.join(root, path))
            e = {"path": path, "mode": stat.S_IMODE(st.st_mode)}
            if stat.S_ISDIR(st.st_mode):
                e["kind"] = "dir"
            elif stat.S_ISLNK(st.st_mode):
                e["kind"] = "symlink"
                e["target"] = os.readlink(os.path.join(root, path))
            elif st.st_nlink > 1 and (st.st_dev, st.st_ino) in inodes:
                e["kind"] = "hardlink"
                e["target"] = inodes[(st.st_dev, st.st_ino)]
            else:
                e["kind"] = "file"
                with open(os.path.join(root, path), encoding="utf-8") as f:
                    e["content"] = f.read()
                if st.st_nlink > 1:
                    inodes[(st.st_dev, st.st_ino)] = path
            entries.append(e)
            if stat.S_ISDIR(st.st_mode):
                walk(path)
    walk("")
    return entries

def sent(tar_path):
    kinds = {tarfile.REGTYPE: "file", tarfile.AREGTYPE: "file", tarfile.DIRTYPE: "dir",
             tarfile.SYMTYPE: "symlink", tarfile.LNKTYPE: "hardlink",
             tarfile.FIFOTYPE: "fifo", tarfile.CHRTYPE: "chardevice",
             tarfile.BLKTYPE: "blockdevice"}
    out = []
    with tarfile.open(tar_path, format=tarfile.PAX_FORMAT, encoding="utf-8") as t:
        for m in t.getmembers():
            e = {"path": m.name.rstrip("/"), "kind": kinds[m.type],
                 "mode": m.mode & 0o7777, "size": m.size}
            if m.type in (tarfile.SYMTYPE, tarfile.LNKTYPE):
                e["link_target"] = m.linkname
            out.append(e)
    return out

cases = []
for name in sorted(os.listdir(os.path.join(work, "cases"))):
    d = os.path.join(work, "cases", name)
    read = lambda f: open(os.path.join(d, f), encoding="utf-8", newline="").read()
    case = {"id": int(name), "tree": read("tree"), "dockerignore": read("dockerignore")}
    if os.path.exists(os.path.join(d, "dockerfile")):
        case["dockerfile"] = read("dockerfile")
    if os.path.exists(os.path.join(d, "sent.tar")):
        case["sent"] = sent(os.path.join(d, "sent.tar"))
    else:
        err = read("cli.err").strip().splitlines()
        case["error"] = [l for l in err if l.strip() and "DEPRECATED" not in l
                         and "BuildKit is currently disabled" not in l
                         and not l.startswith("            ")][-1]
    if os.path.exists(os.path.join(d, "image.txt")):
        files = [l.rstrip("\n") for l in open(os.path.join(d, "image.txt"), encoding="utf-8")]
        case["image_files"] = sorted(l[len("ctx/"):] for l in files
                                     if l.startswith("ctx/") and not l.endswith("/"))
    cases.append(case)

doc = {
    "version": 1,
    "generator": "crates/kiln-dockerfile/tests/oracle/gen.sh",
    "docker_cli": cli_version,
    "method": "sent: the tar body `DOCKER_BUILDKIT=0 docker build` uploads (captured by "
              "tests/oracle/fake_engine.py); image_files: non-directory paths under ctx/ "
              "of the image a real dockerd built from `FROM scratch` + `COPY . /ctx/` "
              "(docker export | tar t), when a daemon was available",
    "daemon": bool(daemon),
    "trees": {t: tree_spec(os.path.join(work, f"spec-{t}")) for t in ("research", "edge")},
    "cases": cases,
}
def dump(value, indent=""):
    """JSON with one line per tree entry, sent entry and short list, for readable diffs."""
    inner = indent + " "
    if isinstance(value, dict) and not all(isinstance(v, (str, int, bool)) for v in value.values()):
        items = [f"{inner}{json.dumps(k)}: {dump(v, inner)}" for k, v in value.items()]
        return "{\n" + ",\n".join(items) + "\n" + indent + "}"
    if isinstance(value, list) and any(isinstance(v, (dict, list)) for v in value):
        items = [f"{inner}{dump(v, inner)}" for v in value]
        return "[\n" + ",\n".join(items) + "\n" + indent + "]"
    return json.dumps(value, ensure_ascii=False)

with open(out, "w", encoding="utf-8") as f:
    f.write(dump(doc) + "\n")
print(f"wrote {out}: {len(cases)} cases", file=sys.stderr)
PY
