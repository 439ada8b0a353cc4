//! `sha256:<hex>` content digests and streaming hashing adapters (a reader and a writer that
//! hash what passes through them).

use std::fmt;
use std::io::{self, Read, Write};

use sha2::{Digest as _, Sha256};

/// A validated `sha256` digest (the only algorithm the store accepts).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Digest {
    hex: String,
}

/// Why a digest string was rejected.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("invalid digest {digest:?}: want sha256:<64 lowercase hex>")]
pub struct DigestError {
    pub digest: String,
}

impl Digest {
    /// Parses `sha256:<64 lowercase hex>`.
    pub fn parse(s: &str) -> Result<Digest, DigestError> {
        s.strip_prefix("sha256:")
            .and_then(Digest::from_hex)
            .ok_or_else(|| DigestError {
                digest: s.to_string(),
            })
    }

    /// Accepts a bare 64-character lowercase hex string.
    pub fn from_hex(hex: &str) -> Option<Digest> {
        (hex.len() == 64
            && hex
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)))
        .then(|| Digest {
            hex: hex.to_string(),
        })
    }

    /// The digest of `data`.
    pub fn of(data: &[u8]) -> Digest {
        Digest {
            hex: hex::encode(Sha256::digest(data)),
        }
    }

    /// The 64 hex characters without the algorithm prefix.
    pub fn hex(&self) -> &str {
        &self.hex
    }
}

impl fmt::Display for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "sha256:{}", self.hex)
    }
}

impl serde::Serialize for Digest {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for Digest {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Digest::parse(&s).map_err(serde::de::Error::custom)
    }
}

/// A reader that hashes and counts every byte read through it.
pub struct HashingReader<R> {
    inner: R,
    hasher: Sha256,
    count: u64,
}

impl<R: Read> HashingReader<R> {
    pub fn new(inner: R) -> Self {
        HashingReader {
            inner,
            hasher: Sha256::new(),
            count: 0,
        }
    }

    /// Reads the rest of the stream (so the digest covers all of it) and returns the digest
    /// and the total byte count.
    pub fn finish(mut self) -> io::Result<(Digest, u64)> {
        io::copy(&mut self, &mut io::sink())?;
        Ok((
            Digest {
                hex: hex::encode(self.hasher.finalize()),
            },
            self.count,
        ))
    }
}

impl<R: Read> Read for HashingReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.hasher.update(&buf[..n]);
        self.count += n as u64;
        Ok(n)
    }
}

/// A writer that hashes and counts every byte written through it.
pub struct HashingWriter<W> {
    inner: W,
    hasher: Sha256,
    count: u64,
}

impl<W: Write> HashingWriter<W> {
    pub fn new(inner: W) -> Self {
        HashingWriter {
            inner,
            hasher: Sha256::new(),
            count: 0,
        }
    }

    /// Returns the inner writer, the digest and the byte count.
    pub fn finish(self) -> (W, Digest, u64) {
        (
            self.inner,
            Digest {
                hex: hex::encode(self.hasher.finalize()),
            },
            self.count,
        )
    }
}

impl<W: Write> Write for HashingWriter<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hasher.update(&buf[..n]);
        self.count += n as u64;
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_and_hash() {
        let d = Digest::of(b"");
        assert_eq!(
            d.to_string(),
            "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        assert_eq!(Digest::parse(&d.to_string()), Ok(d.clone()));
        assert!(Digest::parse("sha256:E3B0").is_err());
        assert!(Digest::parse(&format!("sha512:{}", d.hex())).is_err());
        let mut r = HashingReader::new(&b"abc"[..1]);
        let mut one = [0u8; 1];
        r.read_exact(&mut one).expect("read");
        let (rd, n) = r.finish().expect("finish");
        assert_eq!((rd, n), (Digest::of(b"a"), 1));
    }
}
