//! prober::hpack: HPACK (RFC 7541) header coding for the grpc prober's HTTP/2 client.
//!
//! Hand-written rather than a crate: `hpack` (0.3) is unmaintained since 2016,
//! `httlib-hpack` and `fluke-hpack` pull in more than the ~250 lines needed here, and `h2`
//! keeps its codec private and needs tokio. The encoder only emits literal fields without
//! indexing and without Huffman (always valid). The decoder is complete: static and dynamic
//! tables, table size updates, and Huffman-coded strings (servers such as grpc-go Huffman-code
//! most values). The Huffman code is canonical, so it is built from the code lengths of
//! RFC 7541 Appendix B alone.

use std::collections::VecDeque;

/// Errors decoding a header block.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HpackError {
    #[error("hpack: header block truncated")]
    Truncated,
    #[error("hpack: integer overflow")]
    Overflow,
    #[error("hpack: table index {0} out of range")]
    Index(usize),
    #[error("hpack: invalid huffman code")]
    Huffman,
    #[error("hpack: table size update {0} above the limit")]
    TableSize(usize),
    #[error("hpack: decoded header list larger than {MAX_HEADER_LIST} bytes")]
    HeaderListTooLarge,
}

/// Largest decoded header list of one block, counted as HTTP/2's SETTINGS_MAX_HEADER_LIST_SIZE
/// counts it (name + value + 32 per field). Without it, one indexed reference (one byte) to a
/// 4 KiB dynamic table entry decodes to 4 KiB: a 64 KiB block would become 256 MiB.
pub const MAX_HEADER_LIST: usize = 64 * 1024;

/// The size of one header field in a header list, as HTTP/2 counts it.
pub fn field_size(name: &str, value: &str) -> usize {
    32 + name.len() + value.len()
}

const STATIC: [(&str, &str); 61] = [
    (":authority", ""),
    (":method", "GET"),
    (":method", "POST"),
    (":path", "/"),
    (":path", "/index.html"),
    (":scheme", "http"),
    (":scheme", "https"),
    (":status", "200"),
    (":status", "204"),
    (":status", "206"),
    (":status", "304"),
    (":status", "400"),
    (":status", "404"),
    (":status", "500"),
    ("accept-charset", ""),
    ("accept-encoding", "gzip, deflate"),
    ("accept-language", ""),
    ("accept-ranges", ""),
    ("accept", ""),
    ("access-control-allow-origin", ""),
    ("age", ""),
    ("allow", ""),
    ("authorization", ""),
    ("cache-control", ""),
    ("content-disposition", ""),
    ("content-encoding", ""),
    ("content-language", ""),
    ("content-length", ""),
    ("content-location", ""),
    ("content-range", ""),
    ("content-type", ""),
    ("cookie", ""),
    ("date", ""),
    ("etag", ""),
    ("expect", ""),
    ("expires", ""),
    ("from", ""),
    ("host", ""),
    ("if-match", ""),
    ("if-modified-since", ""),
    ("if-none-match", ""),
    ("if-range", ""),
    ("if-unmodified-since", ""),
    ("last-modified", ""),
    ("link", ""),
    ("location", ""),
    ("max-forwards", ""),
    ("proxy-authenticate", ""),
    ("proxy-authorization", ""),
    ("range", ""),
    ("referer", ""),
    ("refresh", ""),
    ("retry-after", ""),
    ("server", ""),
    ("set-cookie", ""),
    ("strict-transport-security", ""),
    ("transfer-encoding", ""),
    ("user-agent", ""),
    ("vary", ""),
    ("via", ""),
    ("www-authenticate", ""),
];

/// Huffman code length of each symbol 0..=255 and EOS (256), RFC 7541 Appendix B.
#[rustfmt::skip]
const CODE_LEN: [u8; 257] = [
    13, 23, 28, 28, 28, 28, 28, 28, 28, 24, 30, 28, 28, 30, 28, 28,
    28, 28, 28, 28, 28, 28, 30, 28, 28, 28, 28, 28, 28, 28, 28, 28,
    6, 10, 10, 12, 13, 6, 8, 11, 10, 10, 8, 11, 8, 6, 6, 6,
    5, 5, 5, 6, 6, 6, 6, 6, 6, 6, 7, 8, 15, 6, 12, 10,
    13, 6, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7,
    7, 7, 7, 7, 7, 7, 7, 7, 8, 7, 8, 13, 19, 13, 14, 6,
    15, 5, 6, 5, 6, 5, 6, 6, 6, 5, 7, 7, 6, 6, 6, 5,
    6, 7, 6, 5, 5, 6, 7, 7, 7, 7, 7, 15, 11, 14, 13, 28,
    20, 22, 20, 20, 22, 22, 22, 23, 22, 23, 23, 23, 23, 23, 24, 23,
    24, 24, 22, 23, 24, 23, 23, 23, 23, 21, 22, 23, 22, 23, 23, 24,
    22, 21, 20, 22, 22, 23, 23, 21, 23, 22, 22, 24, 21, 22, 23, 23,
    21, 21, 22, 21, 23, 22, 23, 23, 20, 22, 22, 22, 23, 22, 22, 23,
    26, 26, 20, 19, 22, 23, 22, 25, 26, 26, 26, 27, 27, 26, 24, 25,
    19, 21, 26, 27, 27, 26, 27, 24, 21, 21, 26, 26, 28, 27, 27, 27,
    20, 24, 20, 21, 22, 21, 21, 23, 22, 22, 25, 25, 24, 24, 26, 23,
    26, 27, 26, 26, 27, 27, 27, 27, 27, 28, 27, 27, 27, 27, 27, 26,
    30,
];

/// Canonical Huffman decoding tables, per code length 1..=30.
struct Huffman {
    /// First code of each length.
    first: [u32; 31],
    /// Number of codes of each length.
    count: [u32; 31],
    /// Index into `symbols` of the first symbol of each length.
    offset: [usize; 31],
    /// Symbols sorted by (length, symbol).
    symbols: Vec<u16>,
}

fn huffman() -> &'static Huffman {
    static H: std::sync::OnceLock<Huffman> = std::sync::OnceLock::new();
    H.get_or_init(|| {
        let mut count = [0u32; 31];
        for &l in CODE_LEN.iter() {
            count[l as usize] += 1;
        }
        let mut symbols: Vec<u16> = (0..257u16).collect();
        symbols.sort_by_key(|&s| (CODE_LEN[s as usize], s));
        let mut first = [0u32; 31];
        let mut offset = [0usize; 31];
        let (mut code, mut idx) = (0u32, 0usize);
        for len in 1..31 {
            first[len] = code;
            offset[len] = idx;
            code = (code + count[len]) << 1;
            idx += count[len] as usize;
        }
        Huffman {
            first,
            count,
            offset,
            symbols,
        }
    })
}

/// The Huffman code of a symbol (for tests and the table check).
#[cfg(test)]
fn code_of(sym: u16) -> (u32, u8) {
    let h = huffman();
    let len = CODE_LEN[sym as usize];
    let pos = h.symbols[h.offset[len as usize]..]
        .iter()
        .position(|&s| s == sym)
        .unwrap_or(0);
    (h.first[len as usize] + pos as u32, len)
}

/// Decodes a Huffman-coded string.
pub fn huffman_decode(data: &[u8]) -> Result<Vec<u8>, HpackError> {
    let h = huffman();
    let mut out = Vec::with_capacity(data.len() * 8 / 5);
    let (mut code, mut len) = (0u32, 0usize);
    for byte in data {
        for bit in (0..8).rev() {
            code = (code << 1) | u32::from((byte >> bit) & 1);
            len += 1;
            if len > 30 {
                return Err(HpackError::Huffman);
            }
            let rel = code.wrapping_sub(h.first[len]);
            if code >= h.first[len] && rel < h.count[len] {
                let sym = h.symbols[h.offset[len] + rel as usize];
                if sym == 256 {
                    return Err(HpackError::Huffman);
                }
                out.push(sym as u8);
                code = 0;
                len = 0;
            }
        }
    }
    // Padding: fewer than 8 bits, all ones (a prefix of EOS).
    if len > 7 || code != (1u32 << len) - 1 {
        return Err(HpackError::Huffman);
    }
    Ok(out)
}

fn encode_int(out: &mut Vec<u8>, first: u8, prefix_bits: u32, mut v: usize) {
    let max = (1usize << prefix_bits) - 1;
    if v < max {
        out.push(first | v as u8);
        return;
    }
    out.push(first | max as u8);
    v -= max;
    while v >= 128 {
        out.push((v % 128) as u8 | 0x80);
        v /= 128;
    }
    out.push(v as u8);
}

fn encode_str(out: &mut Vec<u8>, s: &str) {
    encode_int(out, 0, 7, s.len());
    out.extend_from_slice(s.as_bytes());
}

/// Encodes header fields as literals without indexing (no Huffman).
pub fn encode(fields: &[(&str, &str)]) -> Vec<u8> {
    let mut out = Vec::new();
    for (name, value) in fields {
        out.push(0);
        encode_str(&mut out, name);
        encode_str(&mut out, value);
    }
    out
}

/// A decoder with its dynamic table (one per connection).
#[derive(Debug)]
pub struct Decoder {
    table: VecDeque<(String, String)>,
    size: usize,
    max_size: usize,
    limit: usize,
}

impl Default for Decoder {
    fn default() -> Self {
        Decoder {
            table: VecDeque::new(),
            size: 0,
            max_size: 4096,
            limit: 4096,
        }
    }
}

struct Input<'a> {
    data: &'a [u8],
    pos: usize,
}

impl Input<'_> {
    fn byte(&mut self) -> Result<u8, HpackError> {
        let b = *self.data.get(self.pos).ok_or(HpackError::Truncated)?;
        self.pos += 1;
        Ok(b)
    }
    fn int(&mut self, first: u8, prefix_bits: u32) -> Result<usize, HpackError> {
        let max = (1u64 << prefix_bits) - 1;
        let mut v = u64::from(first) & max;
        if v < max {
            return usize::try_from(v).map_err(|_| HpackError::Overflow);
        }
        // At most 5 continuation bytes (35 bits): in u64 this cannot overflow, and the result
        // must still fit the platform's usize (32 bits on armv7).
        let mut shift = 0;
        loop {
            let b = self.byte()?;
            if shift > 28 {
                return Err(HpackError::Overflow);
            }
            v += u64::from(b & 0x7f) << shift;
            shift += 7;
            if b & 0x80 == 0 {
                return usize::try_from(v).map_err(|_| HpackError::Overflow);
            }
        }
    }
    fn string(&mut self) -> Result<String, HpackError> {
        let first = self.byte()?;
        let len = self.int(first, 7)?;
        let end = self.pos.checked_add(len).ok_or(HpackError::Overflow)?;
        let raw = self.data.get(self.pos..end).ok_or(HpackError::Truncated)?;
        self.pos = end;
        let bytes = if first & 0x80 != 0 {
            huffman_decode(raw)?
        } else {
            raw.to_vec()
        };
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }
}

impl Decoder {
    fn get(&self, index: usize) -> Result<(String, String), HpackError> {
        if index == 0 {
            return Err(HpackError::Index(0));
        }
        if let Some((n, v)) = STATIC.get(index - 1) {
            return Ok((n.to_string(), v.to_string()));
        }
        self.table
            .get(index - 1 - STATIC.len())
            .cloned()
            .ok_or(HpackError::Index(index))
    }

    fn evict(&mut self) {
        while self.size > self.max_size {
            match self.table.pop_back() {
                Some((n, v)) => self.size -= 32 + n.len() + v.len(),
                None => break,
            }
        }
    }

    fn insert(&mut self, name: String, value: String) {
        self.size += 32 + name.len() + value.len();
        self.table.push_front((name, value));
        self.evict();
    }

    /// Decodes one complete header block; a decoded list over [`MAX_HEADER_LIST`] is an error.
    pub fn decode(&mut self, block: &[u8]) -> Result<Vec<(String, String)>, HpackError> {
        let mut inp = Input {
            data: block,
            pos: 0,
        };
        let mut out = HeaderList::default();
        while inp.pos < block.len() {
            let b = inp.byte()?;
            if b & 0x80 != 0 {
                let i = inp.int(b, 7)?;
                out.push(self.get(i)?)?;
            } else if b & 0x40 != 0 {
                let i = inp.int(b, 6)?;
                let name = if i == 0 {
                    inp.string()?
                } else {
                    self.get(i)?.0
                };
                let value = inp.string()?;
                self.insert(name.clone(), value.clone());
                out.push((name, value))?;
            } else if b & 0x20 != 0 {
                let size = inp.int(b, 5)?;
                if size > self.limit {
                    return Err(HpackError::TableSize(size));
                }
                self.max_size = size;
                self.evict();
            } else {
                let i = inp.int(b, 4)?;
                let name = if i == 0 {
                    inp.string()?
                } else {
                    self.get(i)?.0
                };
                let value = inp.string()?;
                out.push((name, value))?;
            }
        }
        Ok(out.fields)
    }
}

/// A decoded header list that stays within [`MAX_HEADER_LIST`].
#[derive(Default)]
struct HeaderList {
    fields: Vec<(String, String)>,
    size: usize,
}

impl HeaderList {
    fn push(&mut self, field: (String, String)) -> Result<(), HpackError> {
        self.size += field_size(&field.0, &field.1);
        if self.size > MAX_HEADER_LIST {
            return Err(HpackError::HeaderListTooLarge);
        }
        self.fields.push(field);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(s: &str) -> Vec<u8> {
        let s: String = s.split_whitespace().collect();
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex"))
            .collect()
    }

    #[test]
    fn canonical_codes_match_the_rfc_table() {
        // Spot checks across the whole table: a wrong length anywhere before shifts these.
        for (sym, code, len) in [
            (0u16, 0x1ff8u32, 13u8),
            (1, 0x7fffd8, 23),
            (9, 0xffffea, 24),
            (b' ' as u16, 0x14, 6),
            (b'0' as u16, 0x0, 5),
            (b'a' as u16, 0x3, 5),
            (b'z' as u16, 0x7b, 7),
            (b'~' as u16, 0x1ffd, 13),
            (127, 0xffffffc, 28),
            (128, 0xfffe6, 20),
            (200, 0x3ffffe2, 26),
            (255, 0x3ffffee, 26),
            (256, 0x3fffffff, 30),
        ] {
            assert_eq!(code_of(sym), (code, len), "symbol {sym}");
        }
        // Kraft: a complete prefix code.
        let kraft: f64 = CODE_LEN.iter().map(|&l| 0.5f64.powi(l as i32)).sum();
        assert!((kraft - 1.0).abs() < 1e-12, "{kraft}");
    }

    #[test]
    fn rfc_examples_with_huffman_and_dynamic_table() {
        // RFC 7541 C.4: three requests with Huffman coding sharing one dynamic table.
        let mut d = Decoder::default();
        let h1 = d
            .decode(&hex("8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff"))
            .expect("first");
        assert_eq!(
            h1,
            vec![
                (":method".into(), "GET".into()),
                (":scheme".into(), "http".into()),
                (":path".into(), "/".into()),
                (":authority".into(), "www.example.com".into()),
            ]
        );
        let h2 = d
            .decode(&hex("8286 84be 5886 a8eb 1064 9cbf"))
            .expect("second");
        assert_eq!(h2[3], (":authority".into(), "www.example.com".into()));
        assert_eq!(h2[4], ("cache-control".into(), "no-cache".into()));
        let h3 = d
            .decode(&hex(
                "8287 85bf 4088 25a8 49e9 5ba9 7d7f 8925 a849 e95b b8e8 b4bf",
            ))
            .expect("third");
        assert_eq!(h3[2], (":path".into(), "/index.html".into()));
        assert_eq!(h3[4], ("custom-key".into(), "custom-value".into()));
    }

    #[test]
    fn indexed_references_cannot_amplify_a_block_past_the_limit() {
        // One 4000-byte value put in the dynamic table, then referenced by 1-byte indexed
        // fields (62 = the newest dynamic entry): 20 references (80 KB) are over the limit,
        // 15 (60 KB) are not.
        let value = "v".repeat(4000);
        let mut insert = vec![0x40, 1, b'x'];
        insert.extend([
            0x7f,
            0x80 + ((4000 - 127) % 128) as u8,
            ((4000 - 127) / 128) as u8,
        ]);
        insert.extend(value.as_bytes());
        let mut ok = insert.clone();
        ok.extend([0x80 | 62; 14]);
        let fields = Decoder::default().decode(&ok).expect("15 fields");
        assert_eq!(fields.len(), 15);
        assert!(fields.iter().all(|(n, v)| n == "x" && *v == value));
        let mut bomb = insert;
        bomb.extend([0x80 | 62; 19]);
        assert_eq!(
            Decoder::default().decode(&bomb),
            Err(HpackError::HeaderListTooLarge)
        );
    }

    #[test]
    fn integers_past_the_platform_width_are_an_error() {
        // 2^35 - 1 + 127 does not fit 32 bits: an error, never a wrapped index.
        let mut inp = Input {
            data: &[0xff, 0xff, 0xff, 0xff, 0xff, 0x7f],
            pos: 0,
        };
        let first = inp.byte().expect("first");
        let r = inp.int(first, 7);
        if usize::BITS < 64 {
            assert_eq!(r, Err(HpackError::Overflow));
        } else {
            assert_eq!(r, Ok(127 + (1 << 35) - 1));
        }
        let mut inp = Input {
            data: &[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01],
            pos: 0,
        };
        let first = inp.byte().expect("first");
        assert_eq!(inp.int(first, 7), Err(HpackError::Overflow));
    }

    #[test]
    fn encoded_literals_round_trip_and_garbage_is_an_error() {
        let block = encode(&[
            (":path", "/grpc.health.v1.Health/Check"),
            ("te", "trailers"),
        ]);
        let mut d = Decoder::default();
        assert_eq!(
            d.decode(&block).expect("decode"),
            vec![
                (":path".into(), "/grpc.health.v1.Health/Check".into()),
                ("te".into(), "trailers".into())
            ]
        );
        assert_eq!(d.decode(&[0xff]), Err(HpackError::Truncated));
        assert_eq!(d.decode(&[0x80 | 100]), Err(HpackError::Index(100)));
        // EOS inside a string is invalid.
        assert_eq!(
            huffman_decode(&[0xff, 0xff, 0xff, 0xff]),
            Err(HpackError::Huffman)
        );
    }
}
