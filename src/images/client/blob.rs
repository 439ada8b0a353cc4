//! Blob downloads: hashed while streaming, resumed with `Range` requests into a partial
//! file, serialized between processes by a flock of that file, with a body deadline that
//! grows with the blob's size ([`MIN_RATE`]).

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use sha2::{Digest as _, Sha256};

use crate::httpclient::{self, read_body, HttpError, Limits};
use crate::images::digest::Digest;
use crate::images::registry::Endpoint;

use super::{retryable, Client, ProgressFn, RegistryError, What, MAX_CONFIG, MIN_RATE};

impl Client<'_> {
    /// The limits of a blob download with `remaining` of its bytes still to come.
    fn blob_limits(&self, remaining: u64) -> Limits {
        let body = self.limits.body + Duration::from_secs(remaining / MIN_RATE);
        Limits {
            max_body: remaining,
            body,
            total: self.limits.connect + self.limits.head + body,
            ..self.limits
        }
    }

    /// Downloads blob `digest` of `size` bytes into `dir/<hex>`, resuming from
    /// `dir/<hex>.partial`; returns the path of the complete, verified file. Concurrent
    /// downloads of the same blob (two processes) serialize on a flock of the partial file.
    pub fn blob_to_file(
        &self,
        ep: &Endpoint,
        repo: &str,
        digest: &Digest,
        size: u64,
        dir: &Path,
        progress: ProgressFn<'_>,
    ) -> Result<PathBuf, RegistryError> {
        let done = dir.join(digest.hex());
        let partial = dir.join(format!("{}.partial", digest.hex()));
        let what = What::Blob(digest.to_string());
        let write_err = |path: &Path, source: io::Error| RegistryError::Write {
            reference: self.reference.clone(),
            digest: digest.to_string(),
            path: path.to_path_buf(),
            source,
        };
        // Open and lock the partial file; if another download renamed it meanwhile, the
        // lock is on a file no longer at that path: open again.
        let mut file = loop {
            let file = OpenOptions::new()
                .create(true)
                .truncate(false)
                .read(true)
                .write(true)
                .open(&partial)
                .map_err(|e| write_err(&partial, e))?;
            flock(&file).map_err(|e| write_err(&partial, e))?;
            if done.is_file() {
                progress(size);
                return Ok(done);
            }
            let ours = file.metadata().map_err(|e| write_err(&partial, e))?.ino();
            match fs::metadata(&partial) {
                Ok(m) if m.ino() == ours => break file,
                _ => continue,
            }
        };
        // Hash what an interrupted download left.
        let mut hasher = Sha256::new();
        let mut have = 0u64;
        {
            let mut buf = vec![0u8; 256 << 10];
            file.seek(SeekFrom::Start(0))
                .map_err(|e| write_err(&partial, e))?;
            loop {
                let n = file.read(&mut buf).map_err(|e| write_err(&partial, e))?;
                if n == 0 {
                    break;
                }
                hasher.update(&buf[..n]);
                have += n as u64;
            }
        }
        if have > size {
            restart(&mut file, &mut hasher, &mut have).map_err(|e| write_err(&partial, e))?;
        } else if have > 0 {
            log::info!(
                "pull {}: resuming blob {digest} at {have} of {size} bytes",
                self.reference
            );
        }
        progress(have);
        let mut attempt = 0u32;
        let mut buf = vec![0u8; 256 << 10];
        while have < size {
            let mut headers = vec![("Accept-Encoding", "identity".to_string())];
            if have > 0 {
                headers.push(("Range", format!("bytes={have}-")));
            }
            // A stalled connection ends (and is resumed) instead of hanging the pull.
            let limits = self.blob_limits(size - have);
            let resp = self.get(
                ep,
                repo,
                &format!("blobs/{digest}"),
                &headers,
                &limits,
                &what,
            )?;
            match resp.status().as_u16() {
                206 => {
                    let start = resp
                        .headers()
                        .get("content-range")
                        .and_then(|v| v.to_str().ok())
                        .and_then(content_range_start);
                    if start != Some(have) {
                        // Not the range asked for: start over.
                        restart(&mut file, &mut hasher, &mut have)
                            .map_err(|e| write_err(&partial, e))?;
                        progress(0);
                        continue;
                    }
                }
                416 => {
                    attempt += 1;
                    if attempt >= self.retry.attempts {
                        return Err(RegistryError::Status {
                            reference: self.reference.clone(),
                            registry: ep.to_string(),
                            what,
                            status: 416,
                            attempts: attempt,
                        });
                    }
                    restart(&mut file, &mut hasher, &mut have)
                        .map_err(|e| write_err(&partial, e))?;
                    progress(0);
                    continue;
                }
                _ => {
                    if have > 0 {
                        restart(&mut file, &mut hasher, &mut have)
                            .map_err(|e| write_err(&partial, e))?;
                        progress(0);
                    }
                }
            }
            file.seek(SeekFrom::Start(have))
                .map_err(|e| write_err(&partial, e))?;
            // Decoded bytes beyond the blob's size are an error, not a longer download.
            let mut body = httpclient::body_reader(resp.into_body(), size - have);
            let interrupted = loop {
                self.check_cancel()?;
                let n = match body.read(&mut buf) {
                    Ok(0) => break None,
                    Ok(n) => n,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) => match limits.io_error(e) {
                        HttpError::BodyTooLarge { .. } => {
                            drop(file);
                            let _ = fs::remove_file(&partial);
                            return Err(RegistryError::SizeMismatch {
                                reference: self.reference.clone(),
                                digest: digest.clone(),
                                expected: size,
                            });
                        }
                        e => break Some(e.to_string()),
                    },
                };
                if let Err(e) = file.write_all(&buf[..n]) {
                    drop(file);
                    // A full disk is not kept full by a partial download.
                    let _ = fs::remove_file(&partial);
                    return Err(write_err(&partial, e));
                }
                hasher.update(&buf[..n]);
                have += n as u64;
                progress(have);
            };
            if have < size {
                attempt += 1;
                let detail = interrupted.unwrap_or_else(|| {
                    format!("connection closed after {have} of {size} bytes (truncated)")
                });
                if attempt >= self.retry.attempts {
                    return Err(RegistryError::Truncated {
                        reference: self.reference.clone(),
                        registry: ep.to_string(),
                        digest: digest.clone(),
                        expected: size,
                        got: have,
                        detail,
                    });
                }
                log::info!(
                    "pull {}: blob {digest} interrupted at {have} of {size} bytes ({detail}); resuming",
                    self.reference
                );
                self.sleep(attempt, None)?;
            }
        }
        let actual = Digest::from_hex(&hex::encode(hasher.finalize())).ok_or_else(|| {
            write_err(
                &partial,
                io::Error::new(io::ErrorKind::InvalidData, "hash encoding"),
            )
        })?;
        if &actual != digest {
            drop(file);
            let _ = fs::remove_file(&partial);
            return Err(RegistryError::DigestMismatch {
                reference: self.reference.clone(),
                digest: digest.clone(),
                actual,
            });
        }
        file.sync_all().map_err(|e| write_err(&partial, e))?;
        fs::rename(&partial, &done).map_err(|e| write_err(&done, e))?;
        Ok(done)
    }

    /// Downloads a small blob (the image config) into memory and verifies it.
    pub fn blob_bytes(
        &self,
        ep: &Endpoint,
        repo: &str,
        digest: &Digest,
        size: u64,
    ) -> Result<Vec<u8>, RegistryError> {
        let what = What::Blob(digest.to_string());
        if size > MAX_CONFIG {
            return Err(RegistryError::TooLarge {
                reference: self.reference.clone(),
                what,
                limit: MAX_CONFIG,
            });
        }
        let limits = Limits {
            max_body: size,
            ..self.limits
        };
        let mut attempt = 0u32;
        loop {
            let mut resp = self.get(ep, repo, &format!("blobs/{digest}"), &[], &limits, &what)?;
            let (got, detail) = match read_body(resp.body_mut(), &limits) {
                Ok(b) if b.len() as u64 == size => {
                    let actual = Digest::of(&b);
                    if &actual != digest {
                        return Err(RegistryError::DigestMismatch {
                            reference: self.reference.clone(),
                            digest: digest.clone(),
                            actual,
                        });
                    }
                    return Ok(b);
                }
                Err(HttpError::BodyTooLarge { .. }) => {
                    return Err(RegistryError::SizeMismatch {
                        reference: self.reference.clone(),
                        digest: digest.clone(),
                        expected: size,
                    })
                }
                Err(e) if !retryable(&e) => {
                    return Err(self.transport(ep, &what, e, attempt + 1));
                }
                Ok(b) => (b.len() as u64, "truncated".to_string()),
                Err(e) => (0, e.to_string()),
            };
            attempt += 1;
            if attempt >= self.retry.attempts {
                return Err(RegistryError::Truncated {
                    reference: self.reference.clone(),
                    registry: ep.to_string(),
                    digest: digest.clone(),
                    expected: size,
                    got,
                    detail,
                });
            }
            self.sleep(attempt, None)?;
        }
    }
}

/// `bytes 100-199/200` -> 100.
pub(super) fn content_range_start(v: &str) -> Option<u64> {
    let r = v.trim().strip_prefix("bytes")?.trim_start();
    r.split('-').next()?.trim().parse().ok()
}

fn restart(file: &mut File, hasher: &mut Sha256, have: &mut u64) -> io::Result<()> {
    file.set_len(0)?;
    file.seek(SeekFrom::Start(0))?;
    *hasher = Sha256::new();
    *have = 0;
    Ok(())
}

/// Exclusive flock, released when the file is closed.
fn flock(f: &File) -> io::Result<()> {
    crate::sys::lock::lock_exclusive(f)
}
