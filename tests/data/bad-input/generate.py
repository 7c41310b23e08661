#!/usr/bin/env python3
"""Writes the bad-input corpus (issue 21) from the good fixtures in tests/data.

Each case is a folder: its input files and a `case` file of `args:` (the tessera command
line, run in a copy of the folder; `{repo}` is the repository root) and `expect:` lines
(text stderr must contain). tests/bad_input_corpus.rs runs every case and checks that the
command fails cleanly: a non-zero exit without a panic, one `error:` line naming what is
wrong, every `expect:` text, the inputs unchanged and no output or `.partial` left.

Run from the repository root with a release build: `python3 tests/data/bad-input/generate.py`.
The `.tst` cases are imported with target/release/tessera.
"""
import os
import shutil
import struct
import subprocess
import sys
import zlib

ROOT = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.dirname(ROOT)
REPO = os.path.dirname(os.path.dirname(DATA))
BIN = os.path.join(REPO, "target", "release", "tessera")


def case(name, what, args, expect, files=None, fixture=None, edit=None):
    d = os.path.join(ROOT, name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    if fixture:
        shutil.copytree(os.path.join(DATA, fixture), os.path.join(d, "in"))
        if edit:
            edit(os.path.join(d, "in"))
    for f, content in (files or {}).items():
        p = os.path.join(d, f)
        with open(p, "wb") as fh:
            fh.write(content if isinstance(content, bytes) else content.encode())
    with open(os.path.join(d, "case"), "w") as fh:
        fh.write(f"# {what}\n")
        fh.write(f"args: {args}\n")
        for e in expect:
            fh.write(f"expect: {e}\n")


def replace(file, old, new, count=1):
    def f(d):
        p = os.path.join(d, file)
        t = open(p).read()
        assert t.count(old) >= count, (file, old)
        open(p, "w").write(t.replace(old, new, count))
    return f


def cut_after_first(file, marker):
    def f(d):
        p = os.path.join(d, file)
        t = open(p).read()
        end = t.index(marker) + len(marker)
        open(p, "w").write(t[:end])
    return f


def delete_warp_1(d):
    p = os.path.join(d, "kernel-1.traceg")
    t = open(p).read()
    a = t.index("warp = 1\n")
    b = a + t[a:].index("#END_TB")
    open(p, "w").write(t[:a] + t[b:])


def all_ctas_000(d):
    p = os.path.join(d, "kernel-1.traceg")
    t = open(p).read()
    t = t.replace("thread block = 1,0,0", "thread block = 0,0,0")
    t = t.replace("thread block = 2,0,0", "thread block = 0,0,0")
    open(p, "w").write(t)


def imported(fixture):
    tmp = os.path.join(ROOT, ".tmp.tst")
    subprocess.run([BIN, "trace", "import", "accel-sim", os.path.join(DATA, fixture),
                    "-o", tmp], check=True, capture_output=True)
    b = open(tmp, "rb").read()
    os.remove(tmp)
    return b


def edited_index(b):
    """One thread-instruction count of the index changed (924 -> 925), CRC recomputed."""
    b = bytearray(b)
    f = len(b) - 32
    off = struct.unpack_from("<Q", b, f)[0]
    at = off + bytes(b[off:f]).index(struct.pack("<Q", 924))
    struct.pack_into("<Q", b, at, 925)
    struct.pack_into("<I", b, f + 16, zlib.crc32(bytes(b[off:f])))
    return bytes(b)


def flipped_chunk_byte(b):
    b = bytearray(b)
    b[64] ^= 0x40
    return bytes(b)


IMPORT = "trace import accel-sim in -o out.tst"
A100 = "--config {repo}/configs/a100.yaml"


def main():
    if not os.access(BIN, os.X_OK):
        sys.exit(f"build first: {BIN}")
    for e in os.listdir(ROOT):
        if os.path.isdir(os.path.join(ROOT, e)):
            shutil.rmtree(os.path.join(ROOT, e))
    v3 = imported("v3")

    # Data loss: no command writes over one of its inputs.
    case("import-over-its-input", "import told to write the .tst over the kernel list",
         "trace import accel-sim in -o in/kernelslist.g", ["in/kernelslist.g", "refusing to write the output over an input"],
         fixture="v4-imm")
    case("stats-out-over-the-trace", "run told to write its stats over its trace",
         f"run {A100} --trace t.tst --stats-out t.tst", ["t.tst", "refusing to write the output over an input"],
         files={"t.tst": v3})

    # Silent acceptance at import.
    case("import-cut-after-end-tb", "a kernel file cut right after its first #END_TB",
         IMPORT, ["kernel-1.traceg:", "lists 1 thread blocks", "grid (3,1,1) has 3"],
         fixture="v4-noimm", edit=cut_after_first("kernel-1.traceg", "#END_TB\n"))
    case("import-mode-1-without-stride", "an address-mode-1 line missing its stride",
         IMPORT, ["kernel-1.traceg:", "stride or the immediate is missing"],
         fixture="v4-imm",
         edit=replace("kernel-1.traceg", "16 1 0x7f2000010000 16 0 ", "16 1 0x7f2000010000 0 "))
    case("import-v5-line-without-immediate", "a tracer-5 line without its immediate",
         IMPORT, ["kernel-1.traceg:", "line ends before its immediate", "tracer version 5"], fixture="lineinfo",
         edit=replace("kernel-1.traceg", "17 0010 ffffffff 1 R0 S2R 0 0 0 ",
                      "17 0010 ffffffff 1 R0 S2R 0 0 "))
    case("import-warp-listed-twice", "warp 1 renamed warp 0",
         IMPORT, ["kernel-1.traceg:", "warp 0 is listed twice"], fixture="v4-imm",
         edit=replace("kernel-1.traceg", "warp = 1\n", "warp = 0\n"))
    case("import-warp-block-deleted", "warp 1's block deleted",
         IMPORT, ["kernel-1.traceg:", "lists 1 of its 2 warps"], fixture="v4-imm",
         edit=delete_warp_1)
    case("import-shmem-wraps-32-bits", "-shmem = 4294968320 (1,024 after a 32-bit wrap)",
         IMPORT, ["kernel-1.traceg:", "'-shmem'", "4294968320", "out of range"],
         fixture="v4-noimm", edit=replace("kernel-1.traceg", "-shmem = 4096", "-shmem = 4294968320"))
    case("import-shmem-huge", "-shmem = 99999999999",
         IMPORT, ["kernel-1.traceg:", "'-shmem'", "99999999999", "out of range"],
         fixture="v4-noimm", edit=replace("kernel-1.traceg", "-shmem = 4096", "-shmem = 99999999999"))
    case("import-block-dim-wraps-32-bits", "-block dim = (16777217,256,1)",
         IMPORT, ["kernel-1.traceg:", "'-block dim'", "16777217", "out of range"],
         fixture="v4-noimm",
         edit=replace("kernel-1.traceg", "-block dim = (32,1,1)", "-block dim = (16777217,256,1)"))
    case("import-memcpy-wraps", "MemcpyHtoD past the end of the address space",
         IMPORT, ["kernelslist.g:", "0xffffffffffffffff", "64-bit address space"],
         fixture="v4-imm",
         edit=replace("kernelslist.g", "MemcpyHtoD,0x00007f2000000000,131072",
                      "MemcpyHtoD,0xffffffffffffffff,200000"))
    case("import-fadd-with-addresses", "an FADD carrying addresses",
         IMPORT, ["kernel-1.traceg:", "FADD is not a memory instruction"], fixture="lineinfo",
         edit=replace("kernel-1.traceg", "FMUL 2 R4 R4 0 0 ", "FADD 2 R4 R4 4 1 0x7f4000000000 4 0 "))
    case("import-store-width-0", "an STG of width 0 with no addresses",
         IMPORT, ["kernel-1.traceg:", "STG.E is a memory instruction", "found width 0"],
         fixture="lineinfo",
         edit=replace("kernel-1.traceg", "STG.E 2 R2 R5 4 1 0x7f4000100000 4 0 ", "STG.E 2 R2 R5 0 0 "))
    case("import-grid-larger-than-listed", "a grid of (1000000,1,1) with 3 CTAs listed",
         IMPORT, ["kernel-1.traceg", "lists 3 thread blocks", "grid (1000000,1,1) has 1000000"],
         fixture="v4-noimm",
         edit=replace("kernel-1.traceg", "-grid dim = (3,1,1)", "-grid dim = (1000000,1,1)"))
    case("import-every-cta-0-0-0", "every CTA numbered (0,0,0)",
         IMPORT, ["kernel-1.traceg:", "thread block 0,0,0 is listed twice"], fixture="v4-noimm",
         edit=all_ctas_000)
    case("import-exit-leaves-lanes-running", "an EXIT mask that leaves lanes running",
         IMPORT, ["kernel-1.traceg:", "still running"], fixture="v4-noimm",
         edit=replace("kernel-1.traceg", "0070 ffffffff 0 EXIT 0 0 ", "0070 0000ffff 0 EXIT 0 0 "))

    # .tst files: run refuses what verify refuses; messages that say what is wrong.
    case("run-index-edited", "a count in the index edited and its CRC recomputed",
         f"run {A100} --trace t.tst", ["t.tst", "its counts say 36 / 925"],
         files={"t.tst": edited_index(v3)})
    case("tst-appended-bytes", "100 bytes appended after the footer",
         "trace info t.tst", ["t.tst", "100 trailing bytes after the footer"],
         files={"t.tst": v3 + b"\x55" * 100})
    case("tst-short-not-magic", "a 4-byte file that is not a .tst",
         "trace info t.tst", ["t.tst", "not a tessera trace"], files={"t.tst": b"TR\0C"})
    case("tst-truncated", "a .tst cut in half", "trace verify t.tst", ["t.tst", "truncated .tst file"],
         files={"t.tst": v3[: len(v3) // 2]})
    case("tst-flipped-chunk-byte", "one bit flipped in a chunk", "trace verify t.tst",
         ["t.tst", "chunk 0", "checksum mismatch"], files={"t.tst": flipped_chunk_byte(v3)})

    # Configs: ranges at load, naming the key; files bounded.
    case("config-base-dev-zero", "a config whose base is /dev/zero",
         "run --config c.yaml --trace t.tst", ["/dev/zero", "not a regular file"],
         files={"c.yaml": "base: /dev/zero\n", "t.tst": v3})
    case("config-clock-1e30", "clock_hz: 1e30 in a file",
         "run --config c.yaml --trace t.tst", ["c.yaml", "core.clock_hz", "1 MHz to 100 GHz"],
         files={"c.yaml": "base: {repo}/configs/a100.yaml\ncore:\n  clock_hz: 1e30\n",
                "t.tst": v3})
    case("set-sm-count-huge", "--set core.sm_count=1000000",
         f"run {A100} --set core.sm_count=1000000 --trace t.tst", ["core.sm_count", "allowed range"],
         files={"t.tst": v3})
    case("set-host-to-gcp-max", "--set launch.host_to_gcp_ps=u64::MAX",
         f"run {A100} --set launch.host_to_gcp_ps=18446744073709551615 --trace t.tst",
         ["launch.host_to_gcp_ps", "allowed range"], files={"t.tst": v3})
    case("set-dram-clock-1-hz", "--set dram.clock_hz=1 (runs practically forever)",
         f"run {A100} --set dram.clock_hz=1 --trace t.tst", ["dram.clock_hz", "1 MHz to 100 GHz"],
         files={"t.tst": v3})
    case("set-noc-clock-1-hz", "--set noc.clock_hz=1 (queues gigabytes)",
         f"run {A100} --set noc.clock_hz=1 --trace t.tst", ["noc.clock_hz", "1 MHz to 100 GHz"],
         files={"t.tst": v3})

    # Outputs: an unwritable --stats-out fails at setup, before the simulation.
    case("stats-out-unwritable", "--stats-out into a folder that does not exist",
         f"run {A100} --trace t.tst --stats-out no/such/dir/s.json", ["no/such/dir", "not a directory"],
         files={"t.tst": v3})

    # Reports: stats files that are not, and a page over its input.
    case("report-not-json", "a report of a file that is not JSON",
         "report s.json -o r.html", ["s.json", "not JSON"], files={"s.json": "this is not JSON\n"})
    case("report-stats-truncated", "a report of a stats file cut short",
         "report s.json -o r.html", ["s.json", "not JSON", "EOF"],
         files={"s.json": '{"stats_version": 6, "totals": {"ipc": 1.5, "cyc'})
    case("report-not-a-stats-file", "a report of JSON that is not a stats file",
         "report s.json -o r.html", ["s.json", "not a tessera stats file"],
         files={"s.json": '{"totals": {"ipc": 1.5}}\n'})
    case("report-over-its-input", "report told to write the page over its stats file",
         "report s.json -o s.json", ["s.json", "refusing to write the output over an input"],
         files={"s.json": '{"stats_version": 6}\n'})


if __name__ == "__main__":
    main()
