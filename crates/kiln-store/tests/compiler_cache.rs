//! The compiler-cache probe against the real servers of
//! `scripts/store-servers` (nginx WebDAV, moto S3): a writer's login reads
//! and writes; a reader's login reads but cannot write, which the probe
//! says (a cache that grants reads only caches nothing, silently).
//! Without the servers these tests say so and pass (`.ci/run` starts them).

mod common;

use common::*;
use kiln_store::compiler_cache::CompilerCache;
use kiln_store::{AwsSettings, DavAuth};

#[test]
fn webdav_probe_tells_a_writer_from_a_reader() {
    let Some([base, writer, reader]) = required(
        "webdav",
        &[
            "KILN_TEST_WEBDAV",
            "KILN_TEST_WEBDAV_WRITER",
            "KILN_TEST_WEBDAV_READER",
        ],
        "scripts/store-servers up sets them",
    )
    .map(|v| <[String; 3]>::try_from(v).unwrap()) else {
        return;
    };
    let location = format!("{}/{}", base.trim_end_matches('/'), unique("sccache"));
    let open = |who: &str| {
        let (u, p) = pair(who);
        CompilerCache::open_with(&location, Some(DavAuth::Basic(u, p)), None).unwrap()
    };
    let w = open(&writer);
    let p = w.probe();
    assert!(p.ok(), "{p:?}");
    assert_eq!(p.missing, None, "a missing key is a miss");
    // The secret names the server, the namespace and the login.
    let text = w.secret_text(true);
    assert!(
        text.contains("SCCACHE_WEBDAV_ENDPOINT='http://127.0.0.1:"),
        "{text}"
    );
    assert!(
        text.contains("SCCACHE_WEBDAV_KEY_PREFIX='kiln/sccache"),
        "{text}"
    );
    assert!(
        text.contains(&format!("SCCACHE_WEBDAV_USERNAME='{}'", pair(&writer).0)),
        "{text}"
    );
    assert!(text.ends_with("SCCACHE_RECACHE='1'\n"), "{text}");
    let r = open(&reader).probe();
    assert!(!r.ok(), "{r:?}");
    assert!(r.write.is_some(), "{r:?}");
}

#[test]
fn s3_probe_tells_a_writer_from_a_reader() {
    let Some([endpoint, bucket, writer, reader]) = required(
        "s3",
        &[
            "KILN_TEST_S3_ENDPOINT",
            "KILN_TEST_S3_BUCKET",
            "KILN_TEST_S3_WRITER",
            "KILN_TEST_S3_READER",
        ],
        "scripts/store-servers up sets them",
    )
    .map(|v| <[String; 4]>::try_from(v).unwrap()) else {
        return;
    };
    let location = format!("s3://{bucket}/{}", unique("sccache"));
    let open = |who: &str| {
        let (k, s) = pair(who);
        let aws = AwsSettings {
            endpoint: Some(endpoint.clone()),
            region: "us-east-1".into(),
            key: Some((k, s, None)),
        };
        CompilerCache::open_with(&location, None, Some(aws)).unwrap()
    };
    let w = open(&writer);
    let p = w.probe();
    assert!(p.ok(), "{p:?}");
    let text = w.secret_text(false);
    assert!(
        text.contains(&format!("SCCACHE_BUCKET='{bucket}'")),
        "{text}"
    );
    assert!(
        text.contains(&format!("SCCACHE_ENDPOINT='{endpoint}'")),
        "{text}"
    );
    assert!(!text.contains("SCCACHE_RECACHE"), "{text}");
    let r = open(&reader).probe();
    assert!(r.write.is_some(), "a read-only policy is found: {r:?}");
}
