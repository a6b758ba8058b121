#!/usr/bin/env python3
"""Feeds edited plans to `qatc run` and `qatc inspect`: each must run or
refuse with a one-line message, never crash, hang or exit silently.

The edits are those a checksum cannot stop: the code or weights bytes are
changed, the manifest is edited (a token
truncated, replaced by a huge, negative, non-finite or malformed number, an
unknown type name, another token of the manifest; lines deleted, doubled,
swapped or blanked; tokens dropped or added) or a header field is changed,
and the plan is then written again with its segment table and checksum
recomputed, as a careful tamperer would. A deterministic seed makes every
run the same; --count sets how many plans.
"""
import argparse
import os
import random
import struct
import subprocess
import sys

from plans import plan_checksum

HEADER = "<8sIIQQQQQQQQQ40s"  # runtime/include/qatc/Runtime/PlanFormat.h
ALIGN = 64

NUMBERS = ["0", "-1", "1", "-128", "255", "256", "65536", "2147483647",
           "-2147483648", "4294967296", "9223372036854775807",
           "9223372036854775808", "18446744073709551615",
           "-9223372036854775808", "1099511627776", "1e308", "-1e308", "nan",
           "inf", "-inf", "0x10", "1.5", "", "%", "%zz", "%4", "-", "scalar",
           "0x0", "1x1x1x1x1x1x1x1x1x1", "99999999999x99999999999",
           "1099511627776x1099511627776", "-1x2", "3,", ",", "0,0,0,0",
           "f16", "i4", "bf16", "nhwc", "plain", "q", "f", "s", "u"]


def split_plan(data):
    h = list(struct.unpack_from(HEADER, data, 0))
    moff, msize, woff, wsize, coff, csize = h[6:12]
    return (h, data[moff:moff + msize].decode("latin-1"),
            data[woff:woff + wsize], data[coff:coff + csize])


def join_plan(h, manifest, weights, code, header_edit=None):
    """The writer's layout (codegen::writePlan) around edited parts."""
    h = list(h)
    text = manifest.encode("latin-1")
    size = struct.calcsize(HEADER)

    def align(x):
        return (x + ALIGN - 1) // ALIGN * ALIGN
    h[6], h[7] = size, len(text)
    h[8], h[9] = align(size + len(text)), len(weights)
    h[10], h[11] = align(h[8] + len(weights)), len(code)
    h[3] = h[10] + len(code)  # the file size
    out = bytearray(h[3])
    out[size:size + len(text)] = text
    out[h[8]:h[8] + len(weights)] = weights
    out[h[10]:h[10] + len(code)] = code
    if header_edit:
        header_edit(h)
    h[4] = 0  # the checksum, computed with this field as zero
    struct.pack_into(HEADER, out, 0, *h)
    struct.pack_into("<Q", out, 24, plan_checksum(bytes(out)))
    return bytes(out)


def edit_manifest(text, rng):
    lines = text.split("\n")
    tokens = text.split()
    what = rng.randrange(10)
    i = rng.randrange(len(lines))
    toks = lines[i].split(" ")
    j = rng.randrange(len(toks))
    if what == 0:
        toks[j] = toks[j][: rng.randrange(len(toks[j]) + 1)]
    elif what in (1, 2, 3):
        toks[j] = rng.choice(NUMBERS)
    elif what == 4:
        toks[j] = rng.choice(tokens)
    elif what == 5:
        del toks[j]
    elif what == 6:
        toks.insert(j, rng.choice(NUMBERS + tokens))
    elif what == 7:
        k = rng.randrange(len(lines))
        lines[i], lines[k] = lines[k], lines[i]
        return "\n".join(lines)
    elif what == 8:
        lines.insert(i, rng.choice([lines[i], "", " ", "\t", "  x"]))
        return "\n".join(lines)
    else:
        del lines[i]
        return "\n".join(lines)
    lines[i] = " ".join(toks)
    return "\n".join(lines)


def edit_header(rng):
    """An edit of one header field: 1 format version, 2 header size, 3 file
    size, 5 CPU features, 6..11 the segment table."""
    field = rng.choice([1, 2, 3, 5, 5, 6, 7, 8, 9, 10, 11])
    value = rng.choice([0, 1, 63, 64, 127, 128, 1 << 31, (1 << 32) - 1,
                        (1 << 63), (1 << 64) - 1, rng.randrange(1 << 20)])

    def edit(h):
        if field in (1, 2):
            h[field] = value & 0xFFFFFFFF
        elif field == 5:  # drop a feature the code needs, or add one
            h[5] ^= 1 << rng.randrange(10)
        else:
            h[field] = value
    return edit, field


def replace_line(text, prefix, new):
    """`text` with its first line starting with `prefix` replaced by `new`
    (a function of the old line)."""
    lines = text.split("\n")
    for i, line in enumerate(lines):
        if line.startswith(prefix):
            lines[i] = new(line)
            return "\n".join(lines)
    raise ValueError(f"no line starts with {prefix!r}")


def field(i, value):
    def edit(line):
        toks = line.split(" ")
        toks[i] = value
        return " ".join(toks)
    return edit


# Edits that parse and would run the code past its memory (or feed it
# data of another shape) were they believed, and the message each must get.
TARGETED = [
    ("a whitespace-only line", lambda t: t.replace("\n", "\n \n", 1),
     None),
    ("a smaller arena", lambda t: replace_line(t, "arena ", field(1, "64")),
     "lies outside the arena"),
    ("a larger arena", lambda t: replace_line(
        t, "arena ", lambda l: "arena " + str(int(l.split()[1]) + 4096)),
     "the code addresses"),
    ("a renamed layer", lambda t: replace_line(t, "layer ", field(1, "abort")),
     "where the code has"),
    ("a dropped layer", lambda t: replace_line(t, "layer ", lambda l: ""),
     "layers in the manifest"),
    ("a barrier flag that is not 0 or 1", lambda t: replace_line(
        t, "layer ", field(7, "2")), "malformed layer"),
    ("an input of another shape", lambda t: replace_line(
        t, "tensor 0 ", field(4, "1x1x4x4")), "not those the code was"),
    ("an input of another type", lambda t: replace_line(
        t, "tensor 0 ", field(3, "i64")), "does not fit its bytes"),
    ("an overflowing shape", lambda t: replace_line(
        t, "tensor 0 ", field(4, "4294967296x4294967296x4294967296")),
     "too many elements"),
    ("a NaN scale", lambda t: replace_line(
        t, "tensor 1 ", field(10, "nan")), "malformed tensor"),
    ("an input listed twice", lambda t: t.replace(
        "\ninput 0", "\ninput 0\ninput 0"), "listed twice"),
    ("another code digest", lambda t: replace_line(
        t, "code ", field(1, "0123456789abcdef")), "does not match its digest"),
    ("no code digest", lambda t: replace_line(t, "code ", lambda l: ""),
     "no code digest"),
]


def targeted(args, h, manifest, weights, code, path):
    """Each TARGETED edit gets its message from `qatc run`; returns the
    failures."""
    failures = []
    # The code itself edited: never handed to the dynamic loader.
    flipped = bytearray(code)
    flipped[len(code) // 2] ^= 0x40
    cases = [(name, join_plan(h, edit(manifest), weights, code), expect)
             for name, edit, expect in TARGETED]
    cases.append(("a code byte changed",
                  join_plan(h, manifest, weights, bytes(flipped)),
                  "does not match its digest"))
    for name, blob, expect in cases:
        with open(path, "wb") as f:
            f.write(blob)
        p = subprocess.run([args.qatc, "run", path, "--input", args.input],
                           capture_output=True, text=True, timeout=60)
        err = p.stderr.strip()
        ok = (p.returncode == 0 if expect is None else
              p.returncode == 1 and "corrupt plan" in err and expect in err
              and "\n" not in err)
        print(f"   {name:28s} {'ok' if ok else 'FAIL'}: "
              f"{err or 'runs (exit %d)' % p.returncode}")
        if not ok:
            failures.append(f"{name}: exit {p.returncode}, '{err}' "
                            f"(expected {expect or 'to run'})")
    return failures


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--qatc", required=True)
    ap.add_argument("--plan", help="a valid plan")
    ap.add_argument("--model", help="or a model to compile to one first")
    ap.add_argument("--input", required=True, help="its input (.npy)")
    ap.add_argument("--work", required=True)
    ap.add_argument("--count", type=int, default=400)
    ap.add_argument("--seed", type=int, default=18)
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    if args.model:
        args.plan = os.path.join(args.work, "valid.plan")
        subprocess.run([args.qatc, "compile", args.model, "-o", args.plan],
                       check=True, capture_output=True)
    data = open(args.plan, "rb").read()
    h, manifest, weights, code = split_plan(data)
    rng = random.Random(args.seed)
    path = os.path.join(args.work, "edited.plan")
    failures = targeted(args, h, manifest, weights, code, path)
    refused, accepted, tested = 0, 0, 0
    for n in range(args.count):
        if n % 5 == 4:
            edit, field = edit_header(rng)
            blob = join_plan(h, manifest, weights, code, edit)
            label = f"header field {field}"
        elif n % 7 == 6:
            # Code or weights bytes changed; the checksum recomputed.
            seg = bytearray(code if n % 2 else weights)
            for _ in range(rng.randrange(1, 8)):
                if seg:
                    seg[rng.randrange(len(seg))] = rng.randrange(256)
            blob = (join_plan(h, manifest, weights, bytes(seg)) if n % 2 else
                    join_plan(h, manifest, bytes(seg), code))
            label = "code edit" if n % 2 else "weights edit"
        else:
            text = manifest
            for _ in range(rng.choice([1, 1, 1, 2, 3])):
                text = edit_manifest(text, rng)
            if text == manifest:
                continue
            blob = join_plan(h, text, weights, code)
            label = "manifest edit"
        with open(path, "wb") as f:
            f.write(blob)
        tested += 1
        dump = os.path.join(args.work, "dump")
        for cmd in (["run", path, "--input", args.input, "--dump-tensors",
                     dump], ["inspect", path]):
            try:
                p = subprocess.run([args.qatc, *cmd], capture_output=True,
                                   text=True, errors="replace", timeout=60)
            except subprocess.TimeoutExpired:
                failures.append(f"#{n} {label}: qatc {cmd[0]} hung")
                continue
            err = p.stderr.strip()
            if p.returncode == 0:
                accepted += 1
            elif p.returncode == 1 and err and "\n" not in err:
                refused += 1
            else:
                keep = os.path.join(args.work, f"failure-{n}.plan")
                with open(keep, "wb") as f:
                    f.write(blob)
                failures.append(f"#{n} {label}: qatc {cmd[0]} exit "
                                f"{p.returncode}, stderr '{err[-400:]}' "
                                f"(kept as {keep})")
    print(f"edited plans: {tested} ({2 * tested} commands): "
          f"{refused} refused with a one-line message, {accepted} accepted, "
          f"{len(failures)} failures")
    for f in failures[:20]:
        print("  FAIL " + f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
