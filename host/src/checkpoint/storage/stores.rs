//! The object stores behind a checkpoint directory: a local directory
//! (Weir's own store, [`super::local`], which follows no link) or S3 (or an
//! S3-compatible store), and the runtime that drives them.

use super::StorageError;
use super::local::LocalStore;
use super::local::beneath::IfMissing;
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreScheme};
use std::sync::Arc;
use std::time::Duration;

pub(super) fn runtime() -> Result<tokio::runtime::Runtime, StorageError> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("weir-storage")
        .enable_all()
        .build()
        .map_err(StorageError::Runtime)
}

/// A `file://` or `s3://` directory, opened.
pub(super) struct OpenDir {
    pub store: Arc<dyn ObjectStore>,
    /// The directory's path inside `store`.
    pub root: ObjectPath,
    /// For `file://`, the same store, for the calls that go to the local
    /// file system directly.
    pub local: Option<Arc<LocalStore>>,
}

/// The store behind a `file://` or `s3://` directory, the path of the
/// directory in it, and for `file://` the directory on the local file
/// system (created 0700, durably, if missing; refused if another user owns
/// it or others may write it). object_store parses the
/// URI; the stores are built here rather than by `parse_url_opts`, which
/// cannot set the retry policy S3 needs (see [`s3_store`]).
pub(super) fn open_dir(
    dir: &str,
    s3: &crate::config::S3Settings,
    fsync: bool,
    if_missing: IfMissing,
) -> Result<OpenDir, StorageError> {
    let bad = |message: String| StorageError::BadDir { dir: dir.to_string(), message };
    if !(dir.starts_with("file://") || dir.starts_with("s3://")) {
        return Err(bad("must start with file:// or s3://".into()));
    }
    let url =
        url::Url::parse(dir).map_err(|e| bad(format!("not a URI ({e}): use file:///path or s3://bucket/prefix")))?;
    if url.scheme() == "s3" && url.host_str().is_none_or(str::is_empty) {
        return Err(bad("no bucket: write s3://bucket or s3://bucket/prefix".into()));
    }
    match (url.scheme(), ObjectStoreScheme::parse(&url)) {
        ("file", _) => {
            let path = url.to_file_path().ok().filter(|p| p.is_absolute()).ok_or_else(|| {
                bad("a file:// directory must be absolute, as in file:///var/lib/weir/checkpoints".into())
            })?;
            let local = Arc::new(LocalStore::open(&path, fsync, if_missing).map_err(StorageError::Local)?);
            Ok(OpenDir { store: local.clone(), root: ObjectPath::default(), local: Some(local) })
        }
        ("s3", Ok((ObjectStoreScheme::AmazonS3, prefix))) => {
            let store = s3_store(&url, s3).map_err(|e| bad(e.to_string()))?;
            Ok(OpenDir { store: Arc::new(store), root: prefix, local: None })
        }
        _ => Err(bad("must start with file:// or s3://".into())),
    }
}

/// An S3 client for the bucket of `url`: the standard AWS environment
/// variables, then the `state.checkpoints.s3.*` settings over them. Retries
/// are few and short, so an unreachable store fails one checkpoint in
/// seconds rather than stalling the job (object_store's default retries for
/// minutes).
fn s3_store(
    url: &url::Url,
    s3: &crate::config::S3Settings,
) -> Result<object_store::aws::AmazonS3, object_store::Error> {
    use object_store::aws::{AmazonS3Builder, S3ConditionalPut};
    use object_store::{BackoffConfig, ClientOptions, RetryConfig};
    let mut b = AmazonS3Builder::from_env()
        .with_url(url.as_str())
        .with_conditional_put(S3ConditionalPut::ETagMatch)
        .with_retry(RetryConfig {
            backoff: BackoffConfig {
                init_backoff: Duration::from_millis(100),
                max_backoff: Duration::from_secs(2),
                base: 2.0,
            },
            max_retries: 3,
            retry_timeout: Duration::from_secs(10),
        })
        .with_client_options(
            ClientOptions::new().with_timeout(Duration::from_secs(30)).with_connect_timeout(Duration::from_secs(5)),
        );
    if let Some(e) = &s3.endpoint {
        b = b.with_endpoint(e).with_virtual_hosted_style_request(false);
        if e.starts_with("http://") {
            b = b.with_allow_http(true);
        }
    }
    // Our client options replace those `from_env` read, AWS_ALLOW_HTTP
    // among them: honour it here.
    let env_http = std::env::var("AWS_ALLOW_HTTP").is_ok_and(|v| v.eq_ignore_ascii_case("true"));
    if s3.allow_http || env_http {
        b = b.with_allow_http(true);
    }
    if let Some(r) = &s3.region {
        b = b.with_region(r);
    }
    if let Some(k) = &s3.access_key_id {
        b = b.with_access_key_id(k);
    }
    if let Some(k) = &s3.secret_access_key {
        b = b.with_secret_access_key(k);
    }
    b.build()
}
