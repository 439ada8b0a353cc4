//! Unpacked layers at `images/layers/<diffid-hex>/`: compression detection by magic bytes,
//! diff_id verification while unpacking, and the unpack-to-temp-then-rename protocol that makes
//! a layer directory appear only complete. One directory per diff_id, shared between images.

use std::fs::{self, File};
use std::io::{self, BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

use super::blobs::unique_tmp_name;
use super::digest::{Digest, HashingReader};
use super::unpack::{self, UnpackError};

/// Prefix of in-progress layer directories (removed by `ImageStore::open` after a crash).
pub const TMP_LAYER_PREFIX: &str = ".tmp-";

/// Errors of layer handling.
#[derive(Debug, thiserror::Error)]
pub enum LayerError {
    #[error("layer i/o on {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("layer {digest}: {source}")]
    Unpack {
        digest: Digest,
        #[source]
        source: UnpackError,
    },
    #[error("layer {digest}: decompressing: {source}")]
    Decompress {
        digest: Digest,
        #[source]
        source: io::Error,
    },
    #[error("layer {digest}: uncompressed digest {actual} does not match diff_id {expected}")]
    DiffIdMismatch {
        digest: Digest,
        expected: Digest,
        actual: Digest,
    },
}

/// Layer compression, detected from the first bytes of the blob.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    None,
    Gzip,
    Zstd,
}

impl Compression {
    pub fn detect(head: &[u8]) -> Compression {
        if head.starts_with(&[0x1f, 0x8b]) {
            Compression::Gzip
        } else if head.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
            Compression::Zstd
        } else {
            Compression::None
        }
    }

    /// The OCI layer media type for this compression.
    pub fn oci_media_type(self) -> &'static str {
        match self {
            Compression::None => "application/vnd.oci.image.layer.v1.tar",
            Compression::Gzip => "application/vnd.oci.image.layer.v1.tar+gzip",
            Compression::Zstd => "application/vnd.oci.image.layer.v1.tar+zstd",
        }
    }
}

/// Reads the first bytes of `path` to detect its compression.
pub fn detect_file(path: &Path) -> io::Result<Compression> {
    let mut head = [0u8; 4];
    let mut f = File::open(path)?;
    let mut n = 0;
    while n < head.len() {
        let k = f.read(&mut head[n..])?;
        if k == 0 {
            break;
        }
        n += k;
    }
    Ok(Compression::detect(&head[..n]))
}

/// Opens a blob (or an archive) as an uncompressed stream, detecting gzip/zstd by magic.
pub fn decompressed(blob: File) -> io::Result<Box<dyn Read>> {
    let mut r = BufReader::with_capacity(256 << 10, blob);
    let kind = Compression::detect(r.fill_buf()?);
    Ok(match kind {
        Compression::None => Box::new(r),
        Compression::Gzip => Box::new(flate2::bufread::MultiGzDecoder::new(r)),
        Compression::Zstd => Box::new(zstd::stream::read::Decoder::with_buffer(r)?),
    })
}

/// Unpacks the layer blob at `blob` (gzip, zstd or plain) into the existing directory `root`
/// exactly as the store does, hashing the uncompressed stream; returns its digest (the
/// diff_id). No fsync: the store's [`Layers::ensure`] adds a syncfs and the atomic rename.
/// `digest` (the blob's) names the layer in errors. Public for the pull benchmark (compared
/// with `tar -x`).
pub fn unpack_layer_file(blob: &Path, digest: &Digest, root: &Path) -> Result<Digest, LayerError> {
    let f = File::open(blob).map_err(|source| LayerError::Io {
        path: blob.to_path_buf(),
        source,
    })?;
    let dec = |source| LayerError::Decompress {
        digest: digest.clone(),
        source,
    };
    let reader = HashingReader::new(decompressed(f).map_err(dec)?);
    let reader = unpack::unpack(reader, root).map_err(|source| LayerError::Unpack {
        digest: digest.clone(),
        source,
    })?;
    let (actual, _) = reader.finish().map_err(dec)?;
    Ok(actual)
}

/// The directory holding unpacked layers.
#[derive(Debug, Clone)]
pub struct Layers {
    dir: PathBuf,
}

impl Layers {
    pub fn open(dir: PathBuf) -> Result<Layers, LayerError> {
        fs::create_dir_all(&dir).map_err(|source| LayerError::Io {
            path: dir.clone(),
            source,
        })?;
        Ok(Layers { dir })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn path(&self, diff_id: &Digest) -> PathBuf {
        self.dir.join(diff_id.hex())
    }

    pub fn exists(&self, diff_id: &Digest) -> bool {
        self.path(diff_id).is_dir()
    }

    /// Checks that blob `blob_path` (digest `digest`) decompresses to `diff_id` without
    /// unpacking it.
    pub fn verify(
        &self,
        blob_path: &Path,
        digest: &Digest,
        diff_id: &Digest,
    ) -> Result<(), LayerError> {
        let f = File::open(blob_path).map_err(|source| LayerError::Io {
            path: blob_path.to_path_buf(),
            source,
        })?;
        let dec = |source| LayerError::Decompress {
            digest: digest.clone(),
            source,
        };
        let r = HashingReader::new(decompressed(f).map_err(dec)?);
        let (actual, _) = r.finish().map_err(dec)?;
        check_diff_id(digest, diff_id, actual)
    }

    /// Unpacks blob `blob_path` into `layers/<diff_id-hex>` unless it exists, verifying the
    /// uncompressed digest. The directory appears only complete (temp dir, syncfs, rename).
    pub fn ensure(
        &self,
        blob_path: &Path,
        digest: &Digest,
        diff_id: &Digest,
    ) -> Result<PathBuf, LayerError> {
        let dest = self.path(diff_id);
        if dest.is_dir() {
            return Ok(dest);
        }
        let tmp = unique_tmp_name(&self.dir, &format!("{TMP_LAYER_PREFIX}{}-", diff_id.hex()));
        let io_err = |path: &Path| {
            let path = path.to_path_buf();
            move |source| LayerError::Io { path, source }
        };
        fs::create_dir(&tmp).map_err(io_err(&tmp))?;
        let result = (|| {
            let actual = unpack_layer_file(blob_path, digest, &tmp)?;
            check_diff_id(digest, diff_id, actual)?;
            unpack::syncfs(&tmp).map_err(io_err(&tmp))?;
            fs::rename(&tmp, &dest).map_err(io_err(&dest))?;
            File::open(&self.dir)
                .and_then(|d| d.sync_all())
                .map_err(io_err(&self.dir))
        })();
        if result.is_err() {
            let _ = fs::remove_dir_all(&tmp);
        }
        result.map(|()| dest)
    }

    /// Diff ids of all complete layer directories.
    pub fn list(&self) -> Result<Vec<Digest>, LayerError> {
        let mut out = Vec::new();
        let rd = fs::read_dir(&self.dir).map_err(|source| LayerError::Io {
            path: self.dir.clone(),
            source,
        })?;
        for entry in rd.flatten() {
            if let Some(d) = entry.file_name().to_str().and_then(Digest::from_hex) {
                out.push(d);
            }
        }
        Ok(out)
    }

    /// Removes a layer directory: renamed to a temp name first so a crash mid-removal never
    /// leaves a partial directory under the real name.
    pub fn remove(&self, diff_id: &Digest) -> Result<(), LayerError> {
        let path = self.path(diff_id);
        let tmp = unique_tmp_name(
            &self.dir,
            &format!("{TMP_LAYER_PREFIX}rm-{}-", &diff_id.hex()[..12]),
        );
        match fs::rename(&path, &tmp) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(source) => return Err(LayerError::Io { path, source }),
        }
        fs::remove_dir_all(&tmp).map_err(|source| LayerError::Io { path: tmp, source })
    }

    /// Removes in-progress directories left by a crash.
    pub fn remove_leftovers(&self) -> Result<(), LayerError> {
        let rd = fs::read_dir(&self.dir).map_err(|source| LayerError::Io {
            path: self.dir.clone(),
            source,
        })?;
        for entry in rd.flatten() {
            if entry
                .file_name()
                .to_string_lossy()
                .starts_with(TMP_LAYER_PREFIX)
            {
                let p = entry.path();
                fs::remove_dir_all(&p).map_err(|source| LayerError::Io { path: p, source })?;
            }
        }
        Ok(())
    }
}

fn check_diff_id(digest: &Digest, diff_id: &Digest, actual: Digest) -> Result<(), LayerError> {
    if &actual != diff_id {
        return Err(LayerError::DiffIdMismatch {
            digest: digest.clone(),
            expected: diff_id.clone(),
            actual,
        });
    }
    Ok(())
}
