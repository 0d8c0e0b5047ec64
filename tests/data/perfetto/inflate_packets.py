#!/usr/bin/env python3
"""Inflates a Perfetto trace's compressed packets as trace_processor does.

usage: inflate_packets.py TRACE OUT

TRACE is a perfetto.protos.Trace; each of its packets (field 1) that holds
compressed_packets (TracePacket field 50, a zlib stream of Trace.packet
records) is replaced by the packets it holds, in place; other packets are
copied. OUT gets the plain Trace, for protoc --decode. Prints key<TAB>value
lines: compressed (packets inflated), largest (bytes of the largest
compressed packet, framing included: Perfetto asks for < 512 KB), plain
(packets that were not compressed), inner (packets inflated from them).
Exits 1 when the framing is broken (a truncated field, a compressed packet
that also holds other fields, a stream that does not inflate, inflated
bytes that are not whole packets).
"""
import sys
import zlib


def varint(buf, i):
    shift = value = 0
    while True:
        if i >= len(buf):
            raise ValueError("truncated varint at %d" % i)
        b = buf[i]
        i += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, i
        shift += 7


def fields(buf):
    """(field, wire type, value or bytes, start, end) of each field of a message."""
    i = 0
    while i < len(buf):
        start = i
        key, i = varint(buf, i)
        field, wire = key >> 3, key & 7
        if wire == 0:
            value, i = varint(buf, i)
        elif wire == 1:
            value, i = buf[i:i + 8], i + 8
        elif wire == 5:
            value, i = buf[i:i + 4], i + 4
        elif wire == 2:
            n, i = varint(buf, i)
            value, i = buf[i:i + n], i + n
        else:
            raise ValueError("wire type %d at %d" % (wire, start))
        if i > len(buf):
            raise ValueError("field %d runs past the end at %d" % (field, start))
        yield field, wire, value, start, i


def packets(buf):
    """The Trace's packets as (bytes, encoded length with their key)."""
    for field, wire, value, start, end in fields(buf):
        if field != 1 or wire != 2:
            raise ValueError("Trace field %d at %d is not a packet" % (field, start))
        yield value, end - start


def main():
    data = open(sys.argv[1], "rb").read()
    out = bytearray()
    compressed = plain = inner = largest = 0
    for packet, framed in packets(data):
        parts = list(fields(packet))
        if any(f == 50 for f, *_ in parts):
            if len(parts) != 1 or parts[0][1] != 2:
                raise ValueError("a compressed packet holds other fields")
            body = zlib.decompress(parts[0][2])
            n = sum(1 for _ in packets(body))  # whole packets only
            out += body
            compressed += 1
            inner += n
            largest = max(largest, framed)
        else:
            out += b"\x0a" + encode_varint(len(packet)) + packet
            plain += 1
    open(sys.argv[2], "wb").write(out)
    print("compressed\t%d" % compressed)
    print("largest\t%d" % largest)
    print("plain\t%d" % plain)
    print("inner\t%d" % inner)


def encode_varint(v):
    b = bytearray()
    while v >= 0x80:
        b.append((v & 0x7F) | 0x80)
        v >>= 7
    b.append(v)
    return bytes(b)


if __name__ == "__main__":
    try:
        main()
    except (ValueError, zlib.error) as e:
        print("inflate_packets: %s: %s" % (sys.argv[1], e), file=sys.stderr)
        sys.exit(1)
