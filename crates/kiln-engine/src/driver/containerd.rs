//! The containerd image store behind a local dockerd, read directly.
//!
//! On dockerd's containerd image store every image lookup through the
//! Engine API (`/images/{name}/json`, `/images/{name}/history`, a filtered
//! `/images/json`) walks every image the engine holds (moby/moby#47564):
//! 7 ms each at ~550 images on the reference machine, and a no-op run of
//! 15 targets asks 16 of them. The same store answers containerd's own
//! `Images.Get` of each name, all at once on one connection, in about two
//! milliseconds: its image records are dockerd's tags, each naming the
//! digest that dockerd calls the image's id.
//!
//! Where the store is: dockerd's own `/info` (`Containerd.Address` and
//! `.Namespaces.Containers`, API 1.46 and later), else the daemon's own
//! configuration read from its process (the peer of the engine's unix
//! socket: its `--containerd`, `--containerd-namespace`, `--exec-root`
//! and `--config-file` flags and that file). `KILN_CONTAINERD` and
//! `KILN_CONTAINERD_NAMESPACE` name it instead (an engine behind a socket
//! proxy), and `KILN_CONTAINERD=off` turns this off. Reaching it takes the right to open its
//! socket (root's, by default): where kiln may not, lookups go through the
//! Engine API as before.
//!
//! Must never: answer for a store it has not checked. A store found is
//! used only after one run asked both it and the Engine API the same
//! questions and they agreed ([`crate::driver::local::LocalEngine`]); and
//! it only ever says what a name is (a name it does not hold is asked of
//! the Engine API).

use std::path::{Path, PathBuf};
use std::time::Duration;

/// A containerd image store: its socket and the namespace of dockerd's
/// images.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Store {
    /// The socket's path.
    pub address: String,
    /// The namespace dockerd keeps its images in (`moby` by default).
    pub namespace: String,
}

/// dockerd's default namespace for its images.
const DEFAULT_NAMESPACE: &str = "moby";

/// The socket of a containerd that dockerd did not start itself.
const SYSTEM_ADDRESS: &str = "/run/containerd/containerd.sock";

/// How long one question to the store may take before the Engine API is
/// asked instead.
const BOUND: Duration = Duration::from_secs(3);

/// What `KILN_CONTAINERD` (a socket, or `off` for none) and
/// `KILN_CONTAINERD_NAMESPACE` (default `moby`) say, for an engine whose
/// store kiln cannot find itself (behind a socket proxy); `Some(None)` for
/// `off`.
pub fn overridden() -> Option<Option<Store>> {
    let address = std::env::var("KILN_CONTAINERD")
        .ok()
        .filter(|a| !a.is_empty())?;
    if address == "off" {
        return Some(None);
    }
    let namespace = std::env::var("KILN_CONTAINERD_NAMESPACE")
        .ok()
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| DEFAULT_NAMESPACE.to_string());
    Some(Some(Store {
        address: address
            .strip_prefix("unix://")
            .unwrap_or(&address)
            .to_string(),
        namespace,
    }))
}

/// The store behind the engine at `host` (`unix://...`): what its `/info`
/// said (`info`), else the daemon's own configuration. `None` when none
/// is found.
pub fn discover(host: &str, info: Option<Store>) -> Option<Store> {
    if let Some(s) = info.filter(|s| !s.address.is_empty()) {
        return Some(Store {
            address: s
                .address
                .strip_prefix("unix://")
                .unwrap_or(&s.address)
                .to_string(),
            ..s
        });
    }
    let socket = host.strip_prefix("unix://")?;
    let pid = peer_pid(Path::new(socket))?;
    let proc_dir = PathBuf::from(format!("/proc/{pid}"));
    let cmdline = std::fs::read(proc_dir.join("cmdline")).ok()?;
    let args: Vec<String> = cmdline
        .split(|b| *b == 0)
        .filter(|a| !a.is_empty())
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect();
    let cwd = std::fs::read_link(proc_dir.join("cwd")).ok();
    from_daemon(&args, cwd.as_deref(), |p| std::fs::read_to_string(p).ok())
}

/// The pid of the process that serves the unix socket at `path`, when it
/// is in this process's pid namespace.
fn peer_pid(path: &Path) -> Option<i32> {
    let stream = std::os::unix::net::UnixStream::connect(path).ok()?;
    let cred = rustix::net::sockopt::socket_peercred(&stream).ok()?;
    Some(cred.pid.as_raw_nonzero().get()).filter(|p| *p > 0)
}

/// The store a dockerd started with `args` (its command line, the program
/// first) uses, from its flags and its configuration file (`read` reads a
/// file). `None` when the program is not dockerd.
fn from_daemon(
    args: &[String],
    cwd: Option<&Path>,
    read: impl Fn(&Path) -> Option<String>,
) -> Option<Store> {
    let program = args.first()?;
    if !program.rsplit('/').next()?.starts_with("dockerd") {
        return None;
    }
    let flag = |name: &str| -> Option<String> {
        let mut found = None;
        let mut it = args[1..].iter();
        while let Some(a) = it.next() {
            let a = a.strip_prefix("--").or_else(|| a.strip_prefix('-'));
            let Some(a) = a else { continue };
            if let Some(v) = a.strip_prefix(name).and_then(|r| r.strip_prefix('=')) {
                found = Some(v.to_string());
            } else if a == name {
                found = it.next().cloned();
            }
        }
        found
    };
    let absolute = |p: String| -> Option<PathBuf> {
        let p = PathBuf::from(p);
        if p.is_absolute() {
            Some(p)
        } else {
            cwd.map(|c| c.join(p))
        }
    };
    let config_file = flag("config-file").unwrap_or_else(|| "/etc/docker/daemon.json".into());
    let config: serde_json::Value = absolute(config_file)
        .and_then(|p| read(&p))
        .and_then(|s| serde_json::from_str(&s).ok())
        .unwrap_or_default();
    let setting = |name: &str| {
        flag(name).or_else(|| config.get(name).and_then(|v| v.as_str()).map(String::from))
    };
    let namespace = setting("containerd-namespace")
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| DEFAULT_NAMESPACE.to_string());
    let address = match setting("containerd").filter(|a| !a.is_empty()) {
        Some(a) => absolute(a.strip_prefix("unix://").unwrap_or(&a).to_string())?,
        // dockerd starts its own containerd under its exec root unless a
        // system containerd ran when it started; its own is the one whose
        // socket exists beside it.
        None => {
            let exec_root = setting("exec-root").unwrap_or_else(|| "/var/run/docker".into());
            let managed = absolute(exec_root)?.join("containerd/containerd.sock");
            if managed.exists() {
                managed
            } else {
                PathBuf::from(SYSTEM_ADDRESS)
            }
        }
    };
    Some(Store {
        address: address.display().to_string(),
        namespace,
    })
}

/// containerd's `GetImageRequest`.
#[derive(Clone, PartialEq, prost::Message)]
struct GetImageRequest {
    #[prost(string, tag = "1")]
    name: String,
}

/// containerd's `GetImageResponse`.
#[derive(Clone, PartialEq, prost::Message)]
struct GetImageResponse {
    #[prost(message, optional, tag = "1")]
    image: Option<Image>,
}

/// containerd's `Image`, the fields read here.
#[derive(Clone, PartialEq, prost::Message)]
struct Image {
    #[prost(string, tag = "1")]
    name: String,
    #[prost(message, optional, tag = "3")]
    target: Option<Descriptor>,
}

/// containerd's `types.Descriptor`, the fields read here.
#[derive(Clone, PartialEq, prost::Message)]
struct Descriptor {
    #[prost(string, tag = "1")]
    media_type: String,
    #[prost(string, tag = "2")]
    digest: String,
}

/// The images of `names` (fully normalised, `docker.io/library/busybox:latest`)
/// that the store holds, each with the digest it names. One `Images.Get` per
/// name, all at once on one connection: a lookup of one key in containerd's
/// database each. (One `Images.List` filtered by every name evaluates each
/// filter against every image the store holds: 5–7 ms for 16 names at ~600
/// images, against ~2 ms for the same names by `Get`, connection included.)
/// An error says why the store could not answer.
pub async fn images(store: &Store, names: &[String]) -> Result<Vec<(String, String)>, String> {
    if names.is_empty() {
        return Ok(Vec::new());
    }
    tokio::time::timeout(BOUND, get_all(store, names))
        .await
        .map_err(|_| {
            format!(
                "{} did not answer within {}s",
                store.address,
                BOUND.as_secs()
            )
        })?
}

/// A new connection to the store.
async fn channel(store: &Store) -> Result<tonic::transport::Channel, String> {
    let path = PathBuf::from(&store.address);
    let connector = tower::service_fn(move |_: tonic::transport::Uri| {
        let path = path.clone();
        async move {
            let stream = tokio::net::UnixStream::connect(path).await?;
            Ok::<_, std::io::Error>(hyper_util::rt::TokioIo::new(stream))
        }
    });
    // The URI is not used: the connector dials the socket.
    tonic::transport::Endpoint::from_static("http://containerd")
        .connect_with_connector(connector)
        .await
        .map_err(|e| kiln_util::error_chain(&e))
}

/// Opens the connection the first question to `store` will be asked on,
/// unless one is kept or being opened: started as soon as the engine has
/// answered, while the run is still being prepared. A store that cannot be
/// reached is left for that question to meet and say.
pub async fn connect_ahead(store: &Store) {
    let slot = kept(store);
    let mut kept = slot.lock().await;
    if kept.is_none()
        && let Ok(Ok(fresh)) = tokio::time::timeout(BOUND, channel(store)).await
    {
        *kept = Some(fresh);
    }
}

type Slot = std::sync::Arc<tokio::sync::Mutex<Option<tonic::transport::Channel>>>;

/// The connection kept for `store`, or where one will be.
fn kept(store: &Store) -> Slot {
    static KEPT: kiln_util::Memo<String, Slot> = kiln_util::Memo::new();
    KEPT.get_or_insert_with(&store.address, Slot::default)
}

/// Asks on the connection kept from the last question to the same store
/// (a build's preflight, then its run), else on a new one. Questions that
/// meet no kept connection wait for the one being opened (the run's early
/// rounds and the preflight ask at once): one connection per store. A kept
/// connection runs on the runtime that opened it: one that fails (that
/// runtime is gone, or the store went away) is dropped and the question
/// asked once more on a new one.
async fn get_all(store: &Store, names: &[String]) -> Result<Vec<(String, String)>, String> {
    let slot = kept(store);
    let kept = slot.lock().await.clone();
    if let Some(kept) = kept {
        match get_on(kept, store, names).await {
            Ok(found) => return Ok(found),
            Err(_) => *slot.lock().await = None,
        }
    }
    let channel = {
        let mut kept = slot.lock().await;
        match kept.as_ref() {
            // Opened by another question meanwhile.
            Some(c) => c.clone(),
            None => {
                let fresh = channel(store).await?;
                *kept = Some(fresh.clone());
                fresh
            }
        }
    };
    let found = get_on(channel, store, names).await;
    if found.is_err() {
        *slot.lock().await = None;
    }
    found
}

async fn get_on(
    channel: tonic::transport::Channel,
    store: &Store,
    names: &[String],
) -> Result<Vec<(String, String)>, String> {
    let namespace: tonic::metadata::MetadataValue<_> = store.namespace.parse().map_err(|_| {
        format!(
            "namespace {:?} is not a valid header value",
            store.namespace
        )
    })?;
    let asked = names.iter().map(|name| {
        let (channel, namespace) = (channel.clone(), namespace.clone());
        async move {
            let mut grpc = tonic::client::Grpc::new(channel);
            grpc.ready().await.map_err(|e| kiln_util::error_chain(&e))?;
            let mut request = tonic::Request::new(GetImageRequest { name: name.clone() });
            request
                .metadata_mut()
                .insert("containerd-namespace", namespace);
            let method = tonic::codegen::http::uri::PathAndQuery::from_static(
                "/containerd.services.images.v1.Images/Get",
            );
            match grpc
                .unary::<_, GetImageResponse, _>(
                    request,
                    method,
                    tonic_prost::ProstCodec::default(),
                )
                .await
            {
                Ok(r) => Ok(r
                    .into_inner()
                    .image
                    .and_then(|i| Some((i.name, i.target?.digest)))),
                Err(s) if s.code() == tonic::Code::NotFound => Ok(None),
                Err(s) => Err(format!("{}: {}", s.code(), s.message())),
            }
        }
    });
    let answers = futures_util::future::join_all(asked).await;
    let mut found = Vec::new();
    for a in answers {
        if let Some(image) = a? {
            found.push(image);
        }
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split(' ').map(String::from).collect()
    }

    #[test]
    fn a_daemon_s_store_is_read_from_its_flags_and_its_configuration() {
        let none = |_: &Path| None;
        // Flags, in both spellings.
        let s = from_daemon(
            &args("/usr/bin/dockerd --containerd=/run/c.sock --containerd-namespace k8s"),
            None,
            none,
        )
        .unwrap();
        assert_eq!(
            s,
            Store {
                address: "/run/c.sock".into(),
                namespace: "k8s".into()
            }
        );
        // Its configuration file, when no flag says.
        let s = from_daemon(
            &args("dockerd --config-file=/etc/d.json"),
            None,
            |p: &Path| {
                (p == Path::new("/etc/d.json")).then(|| {
                    r#"{"containerd": "unix:///x/c.sock", "containerd-namespace": "ci"}"#.into()
                })
            },
        )
        .unwrap();
        assert_eq!(s.address, "/x/c.sock");
        assert_eq!(s.namespace, "ci");
        // Neither: dockerd's own containerd under its exec root when its
        // socket exists, else the system's; the namespace is `moby`.
        let dir = std::env::temp_dir().join(format!("kiln-ctrd-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("containerd")).unwrap();
        let s = from_daemon(&args("dockerd --exec-root=exec"), Some(&dir), none).unwrap();
        assert_eq!(s.address, SYSTEM_ADDRESS);
        assert_eq!(s.namespace, "moby");
        std::fs::create_dir_all(dir.join("exec/containerd")).unwrap();
        std::fs::write(dir.join("exec/containerd/containerd.sock"), "").unwrap();
        let s = from_daemon(&args("dockerd --exec-root=exec"), Some(&dir), none).unwrap();
        assert_eq!(
            s.address,
            dir.join("exec/containerd/containerd.sock")
                .display()
                .to_string()
        );
        let _ = std::fs::remove_dir_all(&dir);
        // A relative path with no known working directory, and a process
        // that is not dockerd (a socket proxy), find nothing.
        assert_eq!(
            from_daemon(&args("dockerd --containerd=c.sock"), None, none),
            None
        );
        assert_eq!(
            from_daemon(&args("/usr/bin/socat UNIX-LISTEN:x"), None, none),
            None
        );
    }
}
