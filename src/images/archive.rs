//! Reading image tarballs (plain, or gzip/zstd compressed as a whole): one streaming pass over the archive that spools every large entry
//! into the import's temp directory while hashing it and keeps small files in memory, then the
//! interpretation of the contents as an OCI image layout (`oci-layout`, `index.json`,
//! `blobs/sha256/*`, with platform selection in nested indexes) or a docker-archive
//! (`manifest.json`), producing verified import plans.

use std::collections::{BTreeMap, HashMap};
use std::fs::{self, File};
use std::io::{self, Read};
use std::path::{Path, PathBuf};

use super::blobs::{spool, BlobError, MAX_JSON_BLOB};
use super::digest::Digest;
use super::layer::{self, Compression};
use super::manifest::{
    is_index_media_type, HostPlatform, RawConfig, RawDescriptor, RawDockerEntry, RawIndex,
    RawManifest, ANN_CONTAINERD_NAME, ANN_REF_NAME, MT_OCI_CONFIG, MT_OCI_MANIFEST,
};
use super::reference::{Reference, ReferenceError};

/// Entries up to this size are kept in memory; larger ones are spooled to disk.
const MEMORY_LIMIT: u64 = 1 << 20;
/// Total bytes kept in memory per archive; past this every entry is spooled.
const MEMORY_TOTAL_LIMIT: u64 = 64 << 20;
/// Maximum depth of nested indexes and of symlink chains inside an archive.
const MAX_HOPS: usize = 8;

/// Errors of archive reading and interpretation; `archive` is the tarball's path.
#[derive(Debug, thiserror::Error)]
pub enum ArchiveError {
    #[error("reading archive {archive}: {source}")]
    Read {
        archive: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("archive {archive}: entry {entry:?} is truncated ({got} of {want} bytes)")]
    Truncated {
        archive: PathBuf,
        entry: String,
        got: u64,
        want: u64,
    },
    #[error("archive {archive}: spooling entry {entry:?}: {source}")]
    Spool {
        archive: PathBuf,
        entry: String,
        #[source]
        source: BlobError,
    },
    #[error("archive {archive} is neither an OCI image layout (index.json) nor a docker-archive (manifest.json)")]
    UnknownFormat { archive: PathBuf },
    #[error("archive {archive}: missing file {name:?}")]
    MissingFile { archive: PathBuf, name: String },
    #[error("archive {archive}: invalid json in {name:?}: {source}")]
    Json {
        archive: PathBuf,
        name: String,
        #[source]
        source: serde_json::Error,
    },
    #[error("archive {archive}: blob {name:?} has content digest {actual}")]
    BlobDigestMismatch {
        archive: PathBuf,
        name: String,
        actual: Digest,
    },
    #[error("archive {archive}: blob {digest} has {actual} bytes, descriptor says {expected}")]
    SizeMismatch {
        archive: PathBuf,
        digest: Digest,
        expected: i64,
        actual: u64,
    },
    #[error("archive {archive}: invalid digest {value:?} in {name:?}")]
    InvalidDigest {
        archive: PathBuf,
        name: String,
        value: String,
    },
    #[error("archive {archive}: image {image} has no manifest for platform {wanted}; available: {available}")]
    NoMatchingPlatform {
        archive: PathBuf,
        image: String,
        wanted: String,
        available: String,
    },
    #[error("archive {archive}: manifest {manifest} has {layers} layers but its config lists {diff_ids} diff_ids")]
    LayerCountMismatch {
        archive: PathBuf,
        manifest: Digest,
        layers: usize,
        diff_ids: usize,
    },
    #[error("archive {archive}: {source}")]
    InvalidReference {
        archive: PathBuf,
        #[source]
        source: ReferenceError,
    },
    #[error("archive {archive}: {what} {digest} has unsupported media type {media_type:?}")]
    UnsupportedMediaType {
        archive: PathBuf,
        what: &'static str,
        digest: Digest,
        media_type: String,
    },
    #[error("archive {archive}: indexes nested deeper than {MAX_HOPS} levels")]
    TooDeep { archive: PathBuf },
    #[error("archive {archive} contains no image")]
    NoImages { archive: PathBuf },
}

/// Where an entry's bytes are.
#[derive(Debug)]
pub enum Content {
    Memory(Vec<u8>),
    Spooled(PathBuf),
}

/// A regular file of the archive, hashed while reading.
#[derive(Debug)]
pub struct ArchiveFile {
    pub digest: Digest,
    pub size: u64,
    pub content: Content,
}

/// Everything read from one archive.
#[derive(Debug)]
pub struct ArchiveContents {
    archive: PathBuf,
    files: HashMap<String, ArchiveFile>,
    links: HashMap<String, String>,
}

/// Normalizes an archive entry name: no leading `/` or `./`, no empty or `.` components.
fn normalize(name: &str) -> String {
    name.split('/')
        .filter(|c| !c.is_empty() && *c != ".")
        .collect::<Vec<_>>()
        .join("/")
}

/// Resolves a link target relative to the directory of `from`.
fn resolve_link(from: &str, target: &str) -> String {
    let mut parts: Vec<&str> = if target.starts_with('/') {
        Vec::new()
    } else {
        let mut p: Vec<&str> = from.split('/').collect();
        p.pop();
        p
    };
    for c in target.split('/') {
        match c {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            c => parts.push(c),
        }
    }
    parts.join("/")
}

/// Streams `archive` once: large entries go to files in `spool_dir`, small ones stay in memory.
pub fn read_archive(archive: &Path, spool_dir: &Path) -> Result<ArchiveContents, ArchiveError> {
    let read_err = |source| ArchiveError::Read {
        archive: archive.to_path_buf(),
        source,
    };
    let f = File::open(archive).map_err(read_err)?;
    let mut tar = tar::Archive::new(layer::decompressed(f).map_err(read_err)?);
    let mut in_memory = 0u64;
    let mut files = HashMap::new();
    let mut links = HashMap::new();
    for entry in tar.entries().map_err(read_err)? {
        let mut entry = entry.map_err(read_err)?;
        let name = normalize(&String::from_utf8_lossy(&entry.path_bytes()));
        let kind = entry.header().entry_type();
        if kind.is_symlink() || kind.is_hard_link() {
            if let Some(target) = entry.link_name_bytes() {
                let target = String::from_utf8_lossy(&target).into_owned();
                let resolved = if kind.is_symlink() {
                    resolve_link(&name, &target)
                } else {
                    normalize(&target)
                };
                links.insert(name, resolved);
            }
            continue;
        }
        if !(kind.is_file() || kind == tar::EntryType::Continuous) {
            continue;
        }
        let want = entry.size();
        let file = if want <= MEMORY_LIMIT && in_memory + want <= MEMORY_TOTAL_LIMIT {
            in_memory += want;
            let mut data = Vec::with_capacity(want as usize);
            entry.read_to_end(&mut data).map_err(read_err)?;
            let got = data.len() as u64;
            if got != want {
                return Err(ArchiveError::Truncated {
                    archive: archive.to_path_buf(),
                    entry: name,
                    got,
                    want,
                });
            }
            ArchiveFile {
                digest: Digest::of(&data),
                size: got,
                content: Content::Memory(data),
            }
        } else {
            let s = spool(&mut entry, spool_dir).map_err(|source| ArchiveError::Spool {
                archive: archive.to_path_buf(),
                entry: name.clone(),
                source,
            })?;
            if s.size != want {
                let _ = fs::remove_file(&s.path);
                return Err(ArchiveError::Truncated {
                    archive: archive.to_path_buf(),
                    entry: name,
                    got: s.size,
                    want,
                });
            }
            ArchiveFile {
                digest: s.digest,
                size: s.size,
                content: Content::Spooled(s.path),
            }
        };
        links.remove(&name);
        files.insert(name, file);
    }
    Ok(ArchiveContents {
        archive: archive.to_path_buf(),
        files,
        links,
    })
}

impl ArchiveContents {
    /// The file named `name`, following links inside the archive.
    pub fn get(&self, name: &str) -> Option<&ArchiveFile> {
        let mut name = normalize(name);
        for _ in 0..MAX_HOPS {
            if let Some(f) = self.files.get(&name) {
                return Some(f);
            }
            name = self.links.get(&name)?.clone();
        }
        None
    }

    fn need(&self, name: &str) -> Result<&ArchiveFile, ArchiveError> {
        self.get(name).ok_or_else(|| ArchiveError::MissingFile {
            archive: self.archive.clone(),
            name: name.to_string(),
        })
    }

    /// The bytes of a small file (JSON documents).
    fn bytes(&self, name: &str) -> Result<Vec<u8>, ArchiveError> {
        let f = self.need(name)?;
        match &f.content {
            Content::Memory(d) => Ok(d.clone()),
            Content::Spooled(p) => {
                let read_err = |source| ArchiveError::Read {
                    archive: self.archive.clone(),
                    source,
                };
                let mut data = Vec::new();
                File::open(p)
                    .map_err(read_err)?
                    .take(MAX_JSON_BLOB)
                    .read_to_end(&mut data)
                    .map_err(read_err)?;
                Ok(data)
            }
        }
    }

    fn json<T: serde::de::DeserializeOwned>(&self, name: &str) -> Result<T, ArchiveError> {
        let data = self.bytes(name)?;
        serde_json::from_slice(&data).map_err(|source| ArchiveError::Json {
            archive: self.archive.clone(),
            name: name.to_string(),
            source,
        })
    }

    fn compression(&self, name: &str) -> Result<Compression, ArchiveError> {
        let f = self.need(name)?;
        match &f.content {
            Content::Memory(d) => Ok(Compression::detect(d)),
            Content::Spooled(p) => layer::detect_file(p).map_err(|source| ArchiveError::Read {
                archive: self.archive.clone(),
                source,
            }),
        }
    }

    fn err_digest(&self, name: &str, value: &str) -> ArchiveError {
        ArchiveError::InvalidDigest {
            archive: self.archive.clone(),
            name: name.to_string(),
            value: value.to_string(),
        }
    }
}

/// How an image is named inside the archive.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ArchiveName {
    /// A full reference (`io.containerd.image.name`, docker RepoTags, a ref.name with `/` or `:`).
    Full(Reference),
    /// Only a tag (`org.opencontainers.image.ref.name: latest`).
    Tag(String),
}

/// Where to get a blob's bytes when committing it to the store.
#[derive(Debug, Clone)]
pub enum BlobData {
    /// The archive file with this (normalized) name.
    File(String),
    /// Synthesized content (the docker-archive manifest).
    Bytes(Vec<u8>),
}

#[derive(Debug, Clone)]
pub struct PlannedLayer {
    pub digest: Digest,
    pub diff_id: Digest,
    pub size: u64,
    pub media_type: String,
}

/// One image found in an archive, with every blob verified against its digest.
#[derive(Debug, Clone)]
pub struct PlannedImage {
    pub names: Vec<ArchiveName>,
    pub manifest_digest: Digest,
    pub config_digest: Digest,
    pub config_size: u64,
    pub created: Option<String>,
    pub layers: Vec<PlannedLayer>,
    /// Manifest, config and layer blobs, no duplicates.
    pub blobs: Vec<(Digest, BlobData)>,
}

impl ArchiveContents {
    pub fn archive(&self) -> &Path {
        &self.archive
    }

    /// Interprets the archive; every image's blobs are verified.
    pub fn plan(&self, host: &HostPlatform) -> Result<Vec<PlannedImage>, ArchiveError> {
        let images = if self.get("index.json").is_some() {
            self.plan_oci(host)?
        } else if self.get("manifest.json").is_some() {
            self.plan_docker()?
        } else {
            return Err(ArchiveError::UnknownFormat {
                archive: self.archive.clone(),
            });
        };
        // One plan per manifest digest, names merged.
        let mut merged: BTreeMap<Digest, PlannedImage> = BTreeMap::new();
        for img in images {
            match merged.get_mut(&img.manifest_digest) {
                Some(m) => {
                    for n in img.names {
                        if !m.names.contains(&n) {
                            m.names.push(n);
                        }
                    }
                }
                None => {
                    merged.insert(img.manifest_digest.clone(), img);
                }
            }
        }
        if merged.is_empty() {
            return Err(ArchiveError::NoImages {
                archive: self.archive.clone(),
            });
        }
        Ok(merged.into_values().collect())
    }

    fn oci_blob_name(d: &Digest) -> String {
        format!("blobs/sha256/{}", d.hex())
    }

    /// Checks every `blobs/sha256/*` file against its name.
    fn verify_oci_blobs(&self) -> Result<(), ArchiveError> {
        for (name, f) in &self.files {
            if let Some(hex) = name.strip_prefix("blobs/sha256/") {
                if f.digest.hex() != hex {
                    return Err(ArchiveError::BlobDigestMismatch {
                        archive: self.archive.clone(),
                        name: name.clone(),
                        actual: f.digest.clone(),
                    });
                }
            }
        }
        Ok(())
    }

    /// Looks up the OCI blob a descriptor points at and checks its size.
    fn oci_desc(&self, desc: &RawDescriptor, ctx: &str) -> Result<(Digest, String), ArchiveError> {
        let d = Digest::parse(&desc.digest).map_err(|_| self.err_digest(ctx, &desc.digest))?;
        let name = Self::oci_blob_name(&d);
        let f = self.need(&name)?;
        if f.digest != d {
            return Err(ArchiveError::BlobDigestMismatch {
                archive: self.archive.clone(),
                name,
                actual: f.digest.clone(),
            });
        }
        if desc.size < 0 || desc.size as u64 != f.size {
            return Err(ArchiveError::SizeMismatch {
                archive: self.archive.clone(),
                digest: d,
                expected: desc.size,
                actual: f.size,
            });
        }
        Ok((d, name))
    }

    fn is_index(&self, desc: &RawDescriptor, name: &str) -> Result<bool, ArchiveError> {
        if let Some(mt) = &desc.media_type {
            return Ok(is_index_media_type(mt));
        }
        let v: serde_json::Value = self.json(name)?;
        Ok(v.get("manifests").is_some())
    }

    fn names_of(&self, desc: &RawDescriptor) -> Result<Vec<ArchiveName>, ArchiveError> {
        if let Some(n) = desc.annotations.get(ANN_CONTAINERD_NAME) {
            let r = Reference::parse(n).map_err(|source| ArchiveError::InvalidReference {
                archive: self.archive.clone(),
                source,
            })?;
            return Ok(vec![ArchiveName::Full(r)]);
        }
        if let Some(n) = desc.annotations.get(ANN_REF_NAME) {
            if n.contains(['/', ':', '@']) {
                let r = Reference::parse(n).map_err(|source| ArchiveError::InvalidReference {
                    archive: self.archive.clone(),
                    source,
                })?;
                return Ok(vec![ArchiveName::Full(r)]);
            }
            return Ok(vec![ArchiveName::Tag(n.clone())]);
        }
        Ok(Vec::new())
    }

    fn plan_oci(&self, host: &HostPlatform) -> Result<Vec<PlannedImage>, ArchiveError> {
        self.verify_oci_blobs()?;
        let index: RawIndex = self.json("index.json")?;
        let mut out = Vec::new();
        // Top-level manifests that carry a platform and share names form one multi-platform
        // image (an index.json written without a nested index).
        let mut platform_groups: BTreeMap<String, (Vec<ArchiveName>, Vec<RawDescriptor>)> =
            BTreeMap::new();
        for desc in &index.manifests {
            let (_, name) = self.oci_desc(desc, "index.json")?;
            let names = self.names_of(desc)?;
            if self.is_index(desc, &name)? {
                let label = label(&names, &desc.digest);
                let chosen = self.select_in_index(&name, &label, host, 0)?;
                out.push(self.plan_oci_manifest(&chosen, names)?);
            } else if desc.platform.is_some() {
                let key = format!("{names:?}");
                platform_groups
                    .entry(key)
                    .or_insert_with(|| (names, Vec::new()))
                    .1
                    .push(desc.clone());
            } else {
                out.push(self.plan_oci_manifest(desc, names)?);
            }
        }
        for (_, (names, descs)) in platform_groups {
            let label = label(&names, &descs[0].digest);
            let chosen = self.select(&descs, &label, host)?;
            out.push(self.plan_oci_manifest(&chosen, names)?);
        }
        Ok(out)
    }

    /// Picks the manifest for `host` in the index blob `name`, descending nested indexes.
    fn select_in_index(
        &self,
        name: &str,
        label: &str,
        host: &HostPlatform,
        depth: usize,
    ) -> Result<RawDescriptor, ArchiveError> {
        if depth >= MAX_HOPS {
            return Err(ArchiveError::TooDeep {
                archive: self.archive.clone(),
            });
        }
        let index: RawIndex = self.json(name)?;
        let chosen = self.select(&index.manifests, label, host)?;
        let (_, cname) = self.oci_desc(&chosen, name)?;
        if self.is_index(&chosen, &cname)? {
            return self.select_in_index(&cname, label, host, depth + 1);
        }
        Ok(chosen)
    }

    fn select(
        &self,
        descs: &[RawDescriptor],
        label: &str,
        host: &HostPlatform,
    ) -> Result<RawDescriptor, ArchiveError> {
        // A single entry without platform is taken as is (a plain index wrapper).
        host.select(descs)
            .cloned()
            .map_err(|e| ArchiveError::NoMatchingPlatform {
                archive: self.archive.clone(),
                image: label.to_string(),
                wanted: host.to_string(),
                available: e.offered(),
            })
    }

    fn plan_oci_manifest(
        &self,
        desc: &RawDescriptor,
        names: Vec<ArchiveName>,
    ) -> Result<PlannedImage, ArchiveError> {
        let (mdigest, mname) = self.oci_desc(desc, "index.json")?;
        let manifest: RawManifest = self.json(&mname)?;
        if let Some(mt) = manifest
            .media_type
            .as_deref()
            .or(desc.media_type.as_deref())
        {
            if is_index_media_type(mt) || !(mt.contains("manifest")) {
                return Err(ArchiveError::UnsupportedMediaType {
                    archive: self.archive.clone(),
                    what: "manifest",
                    digest: mdigest,
                    media_type: mt.to_string(),
                });
            }
        }
        let (cdigest, cname) = self.oci_desc(&manifest.config, &mname)?;
        let mut layers = Vec::new();
        let mut layer_names = Vec::new();
        for l in &manifest.layers {
            let (ld, lname) = self.oci_desc(l, &mname)?;
            let mt = l.media_type.clone().unwrap_or_else(|| {
                self.compression(&lname)
                    .map(|c| c.oci_media_type().to_string())
                    .unwrap_or_default()
            });
            layers.push((ld, l.size as u64, mt));
            layer_names.push(lname);
        }
        let mut blobs = vec![
            (mdigest.clone(), BlobData::File(mname)),
            (cdigest.clone(), BlobData::File(cname.clone())),
        ];
        for (l, n) in layers.iter().zip(layer_names) {
            blobs.push((l.0.clone(), BlobData::File(n)));
        }
        self.finish_plan(names, mdigest, cdigest, &cname, layers, blobs)
    }

    fn finish_plan(
        &self,
        names: Vec<ArchiveName>,
        manifest_digest: Digest,
        config_digest: Digest,
        config_name: &str,
        layers: Vec<(Digest, u64, String)>,
        mut blobs: Vec<(Digest, BlobData)>,
    ) -> Result<PlannedImage, ArchiveError> {
        let config: RawConfig = self.json(config_name)?;
        let config_size = self.need(config_name)?.size;
        let diff_ids = config
            .rootfs
            .diff_ids
            .iter()
            .map(|d| Digest::parse(d).map_err(|_| self.err_digest(config_name, d)))
            .collect::<Result<Vec<_>, _>>()?;
        if diff_ids.len() != layers.len() {
            return Err(ArchiveError::LayerCountMismatch {
                archive: self.archive.clone(),
                manifest: manifest_digest,
                layers: layers.len(),
                diff_ids: diff_ids.len(),
            });
        }
        let layers = layers
            .into_iter()
            .zip(diff_ids)
            .map(|((digest, size, media_type), diff_id)| PlannedLayer {
                digest,
                diff_id,
                size,
                media_type,
            })
            .collect();
        let mut seen = std::collections::HashSet::new();
        blobs.retain(|(d, _)| seen.insert(d.clone()));
        Ok(PlannedImage {
            names,
            manifest_digest,
            config_digest,
            config_size,
            created: config.created,
            layers,
            blobs,
        })
    }

    fn plan_docker(&self) -> Result<Vec<PlannedImage>, ArchiveError> {
        let entries: Vec<RawDockerEntry> = self.json("manifest.json")?;
        let mut out = Vec::new();
        for e in entries {
            let config = self.need(&e.config)?;
            let config_name = normalize(&e.config);
            let mut layers = Vec::new();
            let mut blobs = Vec::new();
            let mut descs = Vec::new();
            for l in &e.layers {
                let f = self.need(l)?;
                let mt = self.compression(l)?.oci_media_type().to_string();
                descs.push(RawDescriptor {
                    media_type: Some(mt.clone()),
                    digest: f.digest.to_string(),
                    size: f.size as i64,
                    platform: None,
                    annotations: HashMap::new(),
                });
                layers.push((f.digest.clone(), f.size, mt));
                blobs.push((f.digest.clone(), BlobData::File(normalize(l))));
            }
            let manifest = RawManifest {
                schema_version: 2,
                media_type: Some(MT_OCI_MANIFEST.to_string()),
                config: RawDescriptor {
                    media_type: Some(MT_OCI_CONFIG.to_string()),
                    digest: config.digest.to_string(),
                    size: config.size as i64,
                    platform: None,
                    annotations: HashMap::new(),
                },
                layers: descs,
            };
            let bytes = serde_json::to_vec(&manifest).map_err(|source| ArchiveError::Json {
                archive: self.archive.clone(),
                name: "manifest.json".into(),
                source,
            })?;
            let mdigest = Digest::of(&bytes);
            let mut all = vec![
                (mdigest.clone(), BlobData::Bytes(bytes)),
                (config.digest.clone(), BlobData::File(config_name.clone())),
            ];
            all.extend(blobs);
            let names = e
                .repo_tags
                .unwrap_or_default()
                .iter()
                .map(|t| {
                    Reference::parse(t)
                        .map(ArchiveName::Full)
                        .map_err(|source| ArchiveError::InvalidReference {
                            archive: self.archive.clone(),
                            source,
                        })
                })
                .collect::<Result<Vec<_>, _>>()?;
            out.push(self.finish_plan(
                names,
                mdigest,
                config.digest.clone(),
                &config_name,
                layers,
                all,
            )?);
        }
        Ok(out)
    }
}

fn label(names: &[ArchiveName], digest: &str) -> String {
    match names.first() {
        Some(ArchiveName::Full(r)) => r.to_string(),
        Some(ArchiveName::Tag(t)) => format!("{t} ({digest})"),
        None => digest.to_string(),
    }
}
