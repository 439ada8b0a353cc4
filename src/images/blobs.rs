//! Content-addressed blob storage at `images/blobs/sha256/<hex>`. Every blob is first written
//! to a temporary file under `images/tmp/` while being hashed, verified against its expected
//! digest, fsynced and only then renamed into place, so a partial blob is never visible.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use super::digest::{Digest, HashingWriter};

/// Largest blob that is read into memory as JSON (manifests, indexes, configs).
pub const MAX_JSON_BLOB: u64 = 16 << 20;

/// Errors of blob storage.
#[derive(Debug, thiserror::Error)]
pub enum BlobError {
    #[error("blob i/o on {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("blob {expected} does not match its content: content digest is {actual}")]
    DigestMismatch { expected: Digest, actual: Digest },
    #[error("blob {digest} is missing from the store")]
    Missing { digest: Digest },
    #[error("blob {digest} is too large to read as json ({size} bytes)")]
    TooLarge { digest: Digest, size: u64 },
}

fn io_err(path: &Path) -> impl FnOnce(io::Error) -> BlobError + '_ {
    move |source| BlobError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// A file written while hashing, fsynced, not yet committed.
#[derive(Debug)]
pub struct Spooled {
    pub path: PathBuf,
    pub digest: Digest,
    pub size: u64,
}

static TMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// A fresh, unique temporary name (pid, time, counter) inside `dir`.
pub fn unique_tmp_name(dir: &Path, prefix: &str) -> PathBuf {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let n = TMP_COUNTER.fetch_add(1, Ordering::Relaxed);
    dir.join(format!("{prefix}{}-{nanos:x}-{n}", std::process::id()))
}

/// Copies `reader` into a new file in `dir` while hashing it, then fsyncs the file.
pub fn spool<R: Read>(mut reader: R, dir: &Path) -> Result<Spooled, BlobError> {
    let path = unique_tmp_name(dir, "spool-");
    let result = (|| {
        let file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)?;
        let mut w = HashingWriter::new(io::BufWriter::with_capacity(256 << 10, file));
        io::copy(&mut reader, &mut w)?;
        let (buf, digest, size) = w.finish();
        let file = buf.into_inner().map_err(|e| e.into_error())?;
        file.sync_all()?;
        Ok((digest, size))
    })();
    match result {
        Ok((digest, size)) => Ok(Spooled { path, digest, size }),
        Err(source) => {
            let _ = fs::remove_file(&path);
            Err(BlobError::Io { path, source })
        }
    }
}

/// The blob directory `images/blobs/sha256` and the temp directory `images/tmp`.
#[derive(Debug, Clone)]
pub struct BlobStore {
    dir: PathBuf,
    tmp: PathBuf,
}

impl BlobStore {
    /// Creates the directories if needed.
    pub fn open(dir: PathBuf, tmp: PathBuf) -> Result<BlobStore, BlobError> {
        fs::create_dir_all(&dir).map_err(io_err(&dir))?;
        fs::create_dir_all(&tmp).map_err(io_err(&tmp))?;
        Ok(BlobStore { dir, tmp })
    }

    pub fn path(&self, digest: &Digest) -> PathBuf {
        self.dir.join(digest.hex())
    }

    pub fn exists(&self, digest: &Digest) -> bool {
        self.path(digest).is_file()
    }

    pub fn open_blob(&self, digest: &Digest) -> Result<File, BlobError> {
        let path = self.path(digest);
        File::open(&path).map_err(|source| {
            if source.kind() == io::ErrorKind::NotFound {
                BlobError::Missing {
                    digest: digest.clone(),
                }
            } else {
                BlobError::Io { path, source }
            }
        })
    }

    /// Reads a small (JSON) blob and checks its digest.
    pub fn read_json_blob(&self, digest: &Digest) -> Result<Vec<u8>, BlobError> {
        let path = self.path(digest);
        let f = self.open_blob(digest)?;
        let size = f.metadata().map_err(io_err(&path))?.len();
        if size > MAX_JSON_BLOB {
            return Err(BlobError::TooLarge {
                digest: digest.clone(),
                size,
            });
        }
        let mut data = Vec::with_capacity(size as usize);
        f.take(MAX_JSON_BLOB + 1)
            .read_to_end(&mut data)
            .map_err(io_err(&path))?;
        let actual = Digest::of(&data);
        if &actual != digest {
            return Err(BlobError::DigestMismatch {
                expected: digest.clone(),
                actual,
            });
        }
        Ok(data)
    }

    /// Stores `data` as blob `expected`: temp file, verify, fsync, rename.
    pub fn put_bytes(&self, data: &[u8], expected: &Digest) -> Result<(), BlobError> {
        if self.exists(expected) {
            return Ok(());
        }
        let spooled = spool(data, &self.tmp)?;
        self.commit(spooled, expected)
    }

    /// Renames an already hashed and fsynced spooled file into place after checking its digest.
    /// The spooled file is consumed (renamed or removed).
    pub fn commit(&self, spooled: Spooled, expected: &Digest) -> Result<(), BlobError> {
        if &spooled.digest != expected {
            let _ = fs::remove_file(&spooled.path);
            return Err(BlobError::DigestMismatch {
                expected: expected.clone(),
                actual: spooled.digest,
            });
        }
        let dest = self.path(expected);
        if dest.is_file() {
            let _ = fs::remove_file(&spooled.path);
            return Ok(());
        }
        fs::rename(&spooled.path, &dest).map_err(|source| {
            let _ = fs::remove_file(&spooled.path);
            BlobError::Io {
                path: dest.clone(),
                source,
            }
        })
    }

    /// Fsyncs the blob directory so committed renames survive a crash.
    pub fn sync(&self) -> Result<(), BlobError> {
        File::open(&self.dir)
            .and_then(|d| d.sync_all())
            .map_err(io_err(&self.dir))
    }

    /// All stored blob digests (files with other names are ignored).
    pub fn list(&self) -> Result<Vec<Digest>, BlobError> {
        let mut out = Vec::new();
        for entry in fs::read_dir(&self.dir).map_err(io_err(&self.dir))? {
            let entry = entry.map_err(io_err(&self.dir))?;
            if let Some(d) = entry.file_name().to_str().and_then(Digest::from_hex) {
                out.push(d);
            }
        }
        Ok(out)
    }

    pub fn remove(&self, digest: &Digest) -> Result<(), BlobError> {
        let path = self.path(digest);
        match fs::remove_file(&path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(source) => Err(BlobError::Io { path, source }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn put_verifies_and_leaves_no_temp_files() {
        let t = tempfile::tempdir().expect("tempdir");
        let store = BlobStore::open(t.path().join("blobs"), t.path().join("tmp")).expect("open");
        let d = Digest::of(b"hello");
        store.put_bytes(b"hello", &d).expect("put");
        assert_eq!(store.read_json_blob(&d).expect("read"), b"hello");
        let wrong = Digest::of(b"other");
        let err = store.put_bytes(b"hello", &wrong).expect_err("mismatch");
        assert!(matches!(err, BlobError::DigestMismatch { .. }), "{err}");
        assert!(!store.exists(&wrong));
        assert_eq!(fs::read_dir(t.path().join("tmp")).expect("tmp").count(), 0);
        assert_eq!(store.list().expect("list"), vec![d]);
    }
}
