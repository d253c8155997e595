"""Reading an HPACK header block (RFC 7541) field by field: how each field
was sent, without decoding it (python3-hpack's Decoder gives the names and
values, in the same order), and taking a block's fragment out of a HEADERS
frame. Used by tests/integration/test_h2_hpack_names.py and
test_h2_message_rules.py, and by tests/bench/h2_wire.py. Standard library
only."""

STATIC_TABLE_ENTRIES = 61  # RFC 7541 Appendix A
HEADERS_PADDED, HEADERS_PRIORITY = 0x8, 0x20  # HEADERS frame flags (RFC 9113 6.2)

# The four field representations (RFC 7541 6.1 to 6.2.3).
INDEXED, INCREMENTAL, WITHOUT_INDEXING, NEVER_INDEXED = (
    "indexed", "with indexing", "without indexing", "never indexed")


class Representation:
    """One field as sent: `form` is one of the four above; `index` the
    table index of the field (indexed) or of its name (a literal whose name
    is indexed), 0 when the name itself was sent; `size` its bytes in the
    block; `huffman` whether a string of it is Huffman-coded."""

    def __init__(self, form, index, size, huffman):
        self.form, self.index, self.size, self.huffman = form, index, size, huffman

    @property
    def name_index(self):
        """The index of a literal's name (0: sent as a string); None for an indexed field."""
        return None if self.form == INDEXED else self.index

    def how(self):
        """In words: "indexed (dynamic 63)", "never indexed, name static 1" ..."""
        def where(i):
            return "static %d" % i if i <= STATIC_TABLE_ENTRIES else "dynamic %d" % i
        if self.form == INDEXED:
            return "indexed (%s)" % where(self.index)
        return "%s, name %s" % (self.form, where(self.index) if self.index else "literal")


def header_block_fragment(flags, payload):
    """A HEADERS frame's payload without its pad length, priority fields and
    padding (RFC 9113 6.2): the part of the header block it carries."""
    if flags & HEADERS_PADDED:
        payload = payload[1:len(payload) - payload[0]]
    if flags & HEADERS_PRIORITY:
        payload = payload[5:]
    return payload


def take_integer(block, at, prefix_bits):
    """An HPACK integer (RFC 7541 5.1) at `at`: (value, next offset)."""
    if at >= len(block):
        raise ValueError("header block ends inside an integer")
    all_ones = (1 << prefix_bits) - 1
    value = block[at] & all_ones
    at += 1
    if value < all_ones:
        return value, at
    shift = 0
    while True:
        if at >= len(block) or shift > 28:
            raise ValueError("bad HPACK integer")
        b = block[at]
        at += 1
        value += (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return value, at


def take_string(block, at):
    """An HPACK string (RFC 7541 5.2) at `at`: (Huffman-coded?, next offset)."""
    if at >= len(block):
        raise ValueError("header block ends before a string")
    huffman = bool(block[at] & 0x80)
    length, at = take_integer(block, at, 7)
    if at + length > len(block):
        raise ValueError("header block ends inside a string")
    return huffman, at + length


def representations(block):
    """The Representation of each field of a header block, in order;
    dynamic table size updates carry no field and are skipped."""
    out, at = [], 0
    while at < len(block):
        start, first = at, block[at]
        if first & 0x80:
            index, at = take_integer(block, at, 7)
            out.append(Representation(INDEXED, index, at - start, False))
            continue
        if first & 0xE0 == 0x20:
            _, at = take_integer(block, at, 5)
            continue
        if first & 0x40:
            form, bits = INCREMENTAL, 6
        else:
            form, bits = (NEVER_INDEXED if first & 0x10 else WITHOUT_INDEXING), 4
        index, at = take_integer(block, at, bits)
        name_huffman = False
        if index == 0:
            name_huffman, at = take_string(block, at)
        value_huffman, at = take_string(block, at)
        out.append(Representation(form, index, at - start, name_huffman or value_huffman))
    return out
