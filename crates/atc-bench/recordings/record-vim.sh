#!/bin/sh
# Records `vim-9.0.1378.bin`: vim 9.0 (Debian 2:9.0.1378) paging through Rust source with syntax
# highlighting in a 120×40 terminal, as the raw bytes it wrote, captured by util-linux `script`.
# Run from the repository root: crates/atc-bench/recordings/record-vim.sh
# The keys are fed from a pipe with pauses so vim draws each page before the next key.
set -eu
out=crates/atc-bench/recordings/vim-9.0.1378.bin
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# The file being paged: the load tool's report sources (1,800 lines of Rust at 0389455, when
# the committed recording was made).
cat crates/atc-bench/src/report/table.rs crates/atc-bench/src/report/tests.rs \
    crates/atc-bench/src/report/mod.rs > "$work/report.rs"
keys() {
    sleep 1
    # Ctrl-F a page down 30 times, Ctrl-D half a page 20 times, Ctrl-B a page back 10 times.
    for _ in $(seq 30); do printf '\006'; sleep 0.1; done
    for _ in $(seq 20); do printf '\004'; sleep 0.1; done
    for _ in $(seq 10); do printf '\002'; sleep 0.1; done
    # A search and its next hits, then the end, the top, and out.
    printf '/fn \r'; sleep 0.2
    for _ in $(seq 10); do printf 'n'; sleep 0.1; done
    printf 'G'; sleep 0.2; printf 'gg'; sleep 0.2
    printf ':q!\r'; sleep 0.5
}
# HOME is the empty dir so no vimrc or viminfo of this machine is read; -u DEFAULTS gives
# vim's stock defaults. script's start and done lines are cut off (the first and last
# line, and the newline script puts before the last).
keys | TERM=xterm-256color HOME="$work" script -q -E never -O "$work/raw" \
    -c "stty cols 120 rows 40; cd '$work' && vim -u DEFAULTS -i NONE -n -c 'syntax on' report.rs" \
    >/dev/null 2>&1
sed '1d;$d' "$work/raw" | head -c -1 > "$out"
ls -l "$out"
