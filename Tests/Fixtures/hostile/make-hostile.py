#!/usr/bin/env python3
# make-hostile.py — writes the crafted (hostile) M4A and MP3 files in this folder.
#
# Each M4A is a committed fixture (../itunsmpb.m4a or ../editlist.m4a) with one thing
# changed to a value that once overflowed arithmetic or ate memory; README.md lists them and
# what the decoder must do with each. Deterministic: run it again and the bytes are the same.
# The MP3 with a rate change needs lame and sox.
#
#   Tests/Fixtures/hostile/make-hostile.py                 # rewrite every file here
#   Tests/Fixtures/hostile/make-hostile.py --sparse PATH   # a 256-MiB sparse file of 1-byte
#                                                          # samples (not committed)
#   Tests/Fixtures/hostile/make-hostile.py --sparse-table PATH  # a sparse file whose stsz
#                                                          # holds 63 Mi real entries (252 MiB)
import os, struct, subprocess, sys, tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.dirname(HERE)
CONTAINERS = {b'moov', b'trak', b'mdia', b'minf', b'stbl', b'udta', b'edts', b'ilst', b'dinf', b'----'}


# ---------------------------------------------------------------- box tree
def parse(d, o=0, e=None, parent=b''):
    """A list of [type, payload] where payload is bytes or a list (a container)."""
    e = len(d) if e is None else e
    out = []
    while o + 8 <= e:
        size, t = struct.unpack('>I4s', d[o:o + 8]); h = 8
        if size == 1: size = struct.unpack('>Q', d[o + 8:o + 16])[0]; h = 16
        elif size == 0: size = e - o
        if t == b'meta':
            out.append([t, [[b'__vf', d[o + h:o + h + 4]]] + parse(d, o + h + 4, o + size, t)])
        elif t in CONTAINERS or parent == b'ilst':
            out.append([t, parse(d, o + h, o + size, t)])
        else:
            out.append([t, d[o + h:o + size]])
        o += size
    return out


def serialize(boxes):
    out = b''
    for t, p in boxes:
        if t == b'__vf':
            continue
        if isinstance(p, list):
            vf = p[0][1] if p and p[0][0] == b'__vf' else b''
            body = vf + serialize([x for x in p if x[0] != b'__vf'])
        else:
            body = p
        out += struct.pack('>I4s', 8 + len(body), t) + body
    return out


def find(boxes, *path):
    for box in boxes:
        if box[0] == path[0]:
            if len(path) == 1:
                return box
            inner = [x for x in box[1] if x[0] != b'__vf'] if isinstance(box[1], list) else []
            found = find(inner, *path[1:])
            if found:
                return found
    return None


STBL = (b'moov', b'trak', b'mdia', b'minf', b'stbl')


def load(name):
    with open(os.path.join(FIXTURES, name), 'rb') as f:
        return parse(f.read())


def write(name, boxes):
    with open(os.path.join(HERE, name), 'wb') as f:
        f.write(serialize(boxes))


def set_smpb(boxes, delay, padding, length):
    data = find(boxes, b'moov', b'udta', b'meta', b'ilst', b'----', b'data')
    text = ' 00000000 %s %s %s 00000000 00000000 00000000 ' % (delay, padding, length)
    data[1] = data[1][:8] + text.encode()


def set_mdhd_timescale(boxes, timescale):
    mdhd = find(boxes, b'moov', b'trak', b'mdia', b'mdhd')
    p = mdhd[1]
    mdhd[1] = p[:12] + struct.pack('>I', timescale) + p[16:]


def set_asc_rate_index(boxes, index):
    """Rewrites the sampling-frequency index of the AudioSpecificConfig (the esds ends with it)."""
    stsd = find(boxes, *STBL, b'stsd')
    p = bytearray(stsd[1])
    at = p.find(b'\x05\x80\x80\x80') + 5  # DecSpecificInfo: AOT(5) rate index(4) channels(4) ...
    assert at > 5, 'no AudioSpecificConfig'
    asc = (p[at] << 8) | p[at + 1]
    asc = (asc & ~(0xF << 7)) | (index << 7)
    p[at:at + 2] = struct.pack('>H', asc)
    stsd[1] = bytes(p)


def stts(boxes, runs):
    box = find(boxes, *STBL, b'stts')
    box[1] = struct.pack('>II', 0, len(runs)) + b''.join(struct.pack('>II', c, d) for c, d in runs)


def stsz_uniform(boxes, size, count):
    box = find(boxes, *STBL, b'stsz')
    box[1] = struct.pack('>III', 0, size, count)


def stsz_entries(boxes):
    box = find(boxes, *STBL, b'stsz')
    _, uniform, count = struct.unpack('>III', box[1][:12])
    return [struct.unpack('>I', box[1][12 + 4 * i:16 + 4 * i])[0] for i in range(count)]


def set_stsz_entry(boxes, index, value):
    box = find(boxes, *STBL, b'stsz')
    p = bytearray(box[1]); p[12 + 4 * index:16 + 4 * index] = struct.pack('>I', value); box[1] = bytes(p)


def stsc(boxes, entries):
    box = find(boxes, *STBL, b'stsc')
    box[1] = struct.pack('>II', 0, len(entries)) + b''.join(struct.pack('>III', f, n, 1) for f, n in entries)


def co64(boxes, offsets):
    stbl = find(boxes, *STBL)
    for i, box in enumerate(stbl[1]):
        if box[0] in (b'stco', b'co64'):
            stbl[1][i] = [b'co64', struct.pack('>II', 0, len(offsets)) + b''.join(struct.pack('>Q', o) for o in offsets)]


def set_elst(boxes, version, entries, movie_timescale=None):
    trak = find(boxes, b'moov', b'trak')
    if version == 1:
        body = struct.pack('>I', 1 << 24) + struct.pack('>I', len(entries) if entries is not None else 0xFFFFFFFF)
        for seg, media in entries or []:
            body += struct.pack('>QqI', seg, media, 0x10000)
    else:
        body = struct.pack('>II', 0, len(entries) if entries is not None else 0xFFFFFFFF)
        for seg, media in entries or []:
            body += struct.pack('>IiI', seg, media, 0x10000)
    edts = [b'edts', [[b'elst', body]]]
    kids = [x for x in trak[1] if x[0] != b'edts']
    kids.insert(1, edts)  # after tkhd
    trak[1] = kids
    if movie_timescale is not None:
        mvhd = find(boxes, b'moov', b'mvhd')
        p = mvhd[1]; mvhd[1] = p[:12] + struct.pack('>I', movie_timescale) + p[16:]


def mdat_offset(boxes):
    o = 0
    for t, p in boxes:
        size = len(serialize([[t, p]]))
        if t == b'mdat':
            return o + 8
        o += size
    raise SystemExit('no mdat')


# ---------------------------------------------------------------- the cases
def m4a_cases():
    base = 'itunsmpb.m4a'  # moov after mdat: changing moov moves no sample

    b = load(base); set_smpb(b, '00000400', '000003BC', '7FFFFFFFFFFFFFFF'); write('smpb-length-max.m4a', b)
    b = load(base); set_smpb(b, '7FFFFFFFFFFFFFFF', '000003BC', '000000000000AC44'); write('smpb-delay-max.m4a', b)
    b = load(base); set_smpb(b, '00000400', '7FFFFFFFFFFFFFFF', '0000000000000000'); write('smpb-padding-max.m4a', b)
    b = load(base); set_smpb(b, 'FFFFFFFFFFFFFC00', 'FFFFFFFFFFFFFFFF', '0000000000000000'); write('smpb-negative.m4a', b)
    b = load(base); set_smpb(b, '-400', '-1', '-1'); write('smpb-minus-sign.m4a', b)

    # 96 kHz (sampling index 0) with every sample lasting 0xFFFFFFFF ticks (12 h each).
    b = load(base); set_asc_rate_index(b, 0); set_mdhd_timescale(b, 96000)
    stts(b, [(45, 0xFFFFFFFF)]); write('stts-delta-max-96k.m4a', b)
    b = load(base); set_mdhd_timescale(b, 0xFFFFFFFF); write('mdhd-timescale-max.m4a', b)
    b = load(base); set_mdhd_timescale(b, 0); write('mdhd-timescale-zero.m4a', b)

    b = load(base); set_elst(b, 1, [(0xFFFFFFFFFFFFFFFF, 0x7FFFFFFFFFFFFFFF)]); write('elst-huge-media-time.m4a', b)
    b = load(base); set_elst(b, 1, [(0xFFFFFFFFFFFFFFFF, 1024)], movie_timescale=1); write('elst-huge-segment.m4a', b)
    b = load(base); set_elst(b, 0, None); write('elst-count-max.m4a', b)

    # Sample tables that claim far more than the file holds.
    b = load(base); stsz_uniform(b, 1, 0xFFFFFFFF); stts(b, [(0xFFFFFFFF, 1024)]); write('stsz-count-max.m4a', b)
    b = load(base); stsc(b, [(1, 0xFFFFFFFF)]); write('stsc-per-chunk-max.m4a', b)
    b = load(base); co64(b, [0xFFFFFFFFFFFFFF00]); write('co64-offset-max.m4a', b)
    b = load(base); set_stsz_entry(b, 3, 0xFFFFFFFF); write('stsz-entry-max.m4a', b)
    b = load(base); stts(b, [(0xFFFFFFFF, 0xFFFFFFFF)] * 2); write('stts-overflow.m4a', b)

    # The head of a 256-MiB file of 1-byte samples: moov first, then an mdat header whose
    # size reaches 256 MiB. Extended with truncate (sparse), it is a valid file whose sample
    # table declares 268 million samples (see --sparse).
    sparse_head()


SPARSE_SIZE = 256 << 20


def sparse_boxes(total):
    b = load('itunsmpb.m4a')
    moov = find(b, b'moov')
    for i in range(2):  # fix the offsets after two passes (moov's size does not depend on them)
        out = [find(b, b'ftyp'), moov]
        first = len(serialize(out)) + 16  # mdat with a 64-bit size
        count = total - first
        stsz_uniform(out, 1, count)
        stts(out, [(count, 1024)])
        stsc(out, [(1, count)])
        co64(out, [first])
    head = serialize(out)
    mdat = struct.pack('>I4sQ', 1, b'mdat', total - len(head))
    return head + mdat


def sparse_head():
    with open(os.path.join(HERE, 'sparse-head.m4a'), 'wb') as f:
        f.write(sparse_boxes(SPARSE_SIZE))


def sparse_table_file(path, count=63 << 20):
    """A file whose stsz really holds `count` 4-byte entries (all 0: sparse, 252 MiB of
    zeros) before the other tables: a real table, not a declared one."""
    b = load('itunsmpb.m4a')
    out = [find(b, b'ftyp'), find(b, b'moov')]
    stts(out, [(count, 1024)])
    stsc(out, [(1, count)])
    co64(out, [0])
    stsz = find(out, *STBL, b'stsz')
    stsz[1] = struct.pack('>III', 0, 0, count)  # entries are written as a hole below
    marker = serialize(out)
    at = marker.find(b'stsz') + 4 + 12  # where the entries go
    head, tail = marker[:at], marker[at:]
    # Every box around stsz grows by the entries' size.
    grown = bytearray(head)
    def grow(o, e):
        while o + 8 <= e:
            size, t = struct.unpack('>I4s', grown[o:o + 8])
            if o < at <= o + size:
                grown[o:o + 4] = struct.pack('>I', size + 4 * count)
                if t in CONTAINERS:
                    grow(o + 8, min(o + size, e))
            o += size
    grow(0, len(grown))
    with open(path, 'wb') as f:
        f.write(grown)
        f.seek(len(head) + 4 * count)
        f.write(tail)


def sparse_file(path):
    with open(path, 'wb') as f:
        f.write(sparse_boxes(SPARSE_SIZE))
        f.truncate(SPARSE_SIZE)


# ---------------------------------------------------------------- MP3 with a rate change
def rate_change_mp3():
    """0.5 s of 44.1-kHz stereo, then 0.5 s of 22.05-kHz mono: two LAME streams, cat'ed."""
    with tempfile.TemporaryDirectory() as work:
        a, b = os.path.join(work, 'a.wav'), os.path.join(work, 'b.wav')
        subprocess.run(['sox', '-n', '-r', '44100', '-c', '2', '-b', '16', a, 'synth', '0.5', 'sine', '440', 'vol', '0.5'], check=True)
        subprocess.run(['sox', '-n', '-r', '22050', '-c', '1', '-b', '16', b, 'synth', '0.5', 'sine', '330', 'vol', '0.5'], check=True)
        parts = []
        for wav, args in ((a, ['-b', '96', '--resample', '44.1']), (b, ['-b', '32', '-m', 'm', '--resample', '22.05'])):
            mp3 = wav[:-4] + '.mp3'
            subprocess.run(['lame', '--quiet', '--noreplaygain'] + args + [wav, mp3], check=True)
            with open(mp3, 'rb') as f:
                parts.append(f.read())
    with open(os.path.join(HERE, 'rate-change.mp3'), 'wb') as f:
        f.write(b''.join(parts))


if __name__ == '__main__':
    if len(sys.argv) == 3 and sys.argv[1] == '--sparse':
        sparse_file(sys.argv[2])
        sys.exit(0)
    if len(sys.argv) == 3 and sys.argv[1] == '--sparse-table':
        sparse_table_file(sys.argv[2])
        sys.exit(0)
    if len(sys.argv) != 1:
        raise SystemExit(__doc__ or 'usage: make-hostile.py [--sparse PATH]')
    m4a_cases()
    rate_change_mp3()
