//! One target's life on its node, in two steps: [`look_up`] decides
//! (its key recorded and its image at hand: a skip; else a claim on the
//! key, taken with a build slot in hand, or a bounded wait for the run that
//! holds it), and [`build_and_record`] builds it and records the build.
//! [`process`] runs both for the scheduler and hands back a [`Done`];
//! [`warm`] looks ahead for a run where much is recorded.
//!
//! Must never: start another target, or decide anything about the run as a
//! whole (stopping, blocking dependents, moving a target to another node):
//! that is the scheduler's, from the `Done` it gets back.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use kiln_store::{Lookup, Record};
use tokio::sync::SemaphorePermit;

use super::handover::{Outputs, engine_for, upstream_outputs};
use super::nodes::{Node, node_jobs};
use super::shared::{RunOptions, Shared, log_path, store_call, store_lookup};
use super::summary::now_rfc3339;
use crate::claims::{Claimed, Waited};
use crate::driver::{BuildRequest, Built, Failed};
use crate::error::EngineError;
use crate::events::Event;
use crate::keys::{Keyed, key_on};
use crate::naming::{by_digest, local_ref};
use crate::spec::BuildSpec;

/// What happened to one target.
pub(super) enum Outcome {
    /// Built: the image, pushed `(reference, digest)` pairs.
    Built(Built, Vec<(String, String)>),
    /// Skipped: the recorded image id, its registry digest, why; where it
    /// was pulled from and which rebuilt upstreams it was cut off by.
    Skipped {
        image_id: String,
        digest: Option<String>,
        pushed: Vec<(String, String)>,
        reason: String,
        pulled: Option<String>,
        cutoff_by: Vec<String>,
    },
    Failed(Failed),
}

pub(super) struct Done {
    pub(super) node: usize,
    pub(super) handed: BTreeMap<String, String>,
    pub(super) index: usize,
    pub(super) outcome: Result<Outcome, EngineError>,
    pub(super) keyed: Option<Keyed>,
    /// The job count handed to the build, if it was handed one.
    pub(super) jobs: Option<u32>,
    /// The node's build slot it ran in, if it took one.
    pub(super) slot: Option<usize>,
    /// Why it was built (what changed since its last record).
    pub(super) changes: Vec<String>,
    pub(super) duration_s: f64,
    /// When it started (took its slot, when it built) and ended, in
    /// seconds since the run started.
    pub(super) start_s: f64,
    pub(super) end_s: f64,
}

/// One target: its key, then [`look_up`] and, unless that skips it,
/// [`build_and_record`]; the claim it took is ended by the outcome.
pub(super) async fn process(
    sh: &Shared,
    k: usize,
    i: usize,
    outputs: &HashMap<String, String>,
    hand_over: &BTreeMap<String, String>,
    rebuilt: &[String],
) -> (Result<Outcome, EngineError>, Option<Keyed>, Held) {
    let spec = &sh.specs[i];
    let node = &sh.nodes[k];
    // The warm-up's key, when it assumed the outputs the upstreams have
    // now and nothing has been built or pulled since (it keyed on node 0's
    // resolver: single-engine runs only).
    let warmed = sh
        .warmed
        .get()
        .filter(|_| k == 0 && !sh.busy.load(std::sync::atomic::Ordering::Relaxed))
        .and_then(|m| m.get(&spec.name))
        .filter(|(assumed, _)| *assumed == upstream_outputs(spec, outputs))
        .map(|(_, keyed)| keyed.clone());
    let keyed = match warmed {
        Some(keyed) => keyed,
        None => match key_on(
            &node.resolver,
            spec,
            &sh.specs,
            outputs,
            sh.opts.stat_cache.clone(),
        )
        .await
        {
            Ok(k) => k,
            Err(e) => return (Err(e), None, Held::default()),
        },
    };
    sh.reporter.event(&Event::Key {
        target: spec.name.clone(),
        key: keyed.key.clone(),
        files: keyed.stats.files,
        read_files: keyed.stats.read_files,
        read_bytes: keyed.stats.read_bytes,
    });
    let mut held = Held::default();
    let mut side = ClaimSide::default();
    let outcome = match serde_json::to_value(&keyed.manifest) {
        Err(e) => Err(EngineError::Input(format!(
            "encoding the input manifest: {e}"
        ))),
        Ok(inputs) => match look_up(sh, node, spec, &keyed, &inputs, rebuilt, &mut side).await {
            Ok(Decided::Skip(o)) => Ok(o),
            Ok(Decided::Build { force, permit }) => {
                let target = Target {
                    sh,
                    node,
                    spec,
                    keyed: &keyed,
                };
                target
                    .build_and_record(inputs, hand_over, force, permit, &mut held)
                    .await
            }
            Err(e) => Err(e),
        },
    };
    let outcome = side.finish(outcome).await;
    (outcome, Some(keyed), held)
}

/// What [`look_up`] decided.
enum Decided<'a> {
    /// Not built: its recorded image is at hand.
    Skip(Outcome),
    /// Built: `force` overwrites a record (forced, or a record that could
    /// not be used); `permit` is the build slot, when it was taken to claim
    /// the key.
    Build {
        force: bool,
        permit: Option<SemaphorePermit<'a>>,
    },
}

/// Looks the key up: a hit whose image is at hand is a skip; a miss is
/// claimed — with a build slot in hand, so no other run waits on a build
/// that has not started — or, when another run holds the claim, waited
/// for without a slot, for at most `--claim-wait`, then looked up again.
async fn look_up<'a>(
    sh: &Shared,
    node: &'a Node,
    spec: &BuildSpec,
    keyed: &Keyed,
    inputs: &serde_json::Value,
    rebuilt: &[String],
    side: &mut ClaimSide,
) -> Result<Decided<'a>, EngineError> {
    let warn = |message: String| {
        sh.reporter.event(&Event::Warning {
            target: spec.name.clone(),
            message,
        })
    };
    let force = sh.opts.force;
    if !keyed.volatile.is_empty() {
        warn(format!("always built: {}", keyed.volatile.join("; ")));
    }
    // A key that cannot vouch for every input never skips.
    let Some(key) = keyed
        .key
        .clone()
        .filter(|_| !force && keyed.volatile.is_empty())
    else {
        return Ok(Decided::Build {
            force,
            permit: None,
        });
    };
    loop {
        match lookup(sh, &key, &warn).await? {
            Lookup::Hit(entry) => {
                let rec = entry.record;
                return Ok(
                    match skip_on(sh, node, spec, rec, inputs.clone(), rebuilt, &key).await? {
                        Some(o) => Decided::Skip(o),
                        None => Decided::Build {
                            force: true,
                            permit: None,
                        },
                    },
                );
            }
            Lookup::Corrupt(why) => {
                warn(format!(
                    "the record for {key} is damaged ({why}); treating it as a miss, rebuilding and repairing it"
                ));
                return Ok(Decided::Build {
                    force: true,
                    permit: None,
                });
            }
            // Not a record this run trusts: built, and its record (signed
            // with the run's key) replaces it.
            Lookup::Untrusted(why) => {
                warn(format!("{why}: rebuilding"));
                return Ok(Decided::Build {
                    force: true,
                    permit: None,
                });
            }
            Lookup::Miss => {}
        }
        let Some(me) = claimant(sh, node, spec).await else {
            return Ok(Decided::Build {
                force,
                permit: None,
            });
        };
        let permit = node.slots.acquire().await.map_err(closed)?;
        // The slot may have been long in coming: another run may have
        // recorded the key meanwhile.
        if !matches!(lookup(sh, &key, &warn).await?, Lookup::Miss) {
            drop(permit);
            continue;
        }
        let ttl = sh.opts.claim_ttl.unwrap_or(crate::claims::DEFAULT_TTL);
        let (generation, holder) =
            match crate::claims::try_claim(&sh.opts.store, &key, &me, ttl, say(sh, spec), || {
                claims_unsupported(sh)
            })
            .await
            {
                Claimed::Won(h) => {
                    side.holding = Some(h);
                    return Ok(Decided::Build {
                        force,
                        permit: Some(permit),
                    });
                }
                Claimed::Without => {
                    return Ok(Decided::Build {
                        force,
                        permit: Some(permit),
                    });
                }
                Claimed::Held {
                    generation,
                    claimant,
                } => (generation, claimant),
            };
        // Waiting takes no build slot: other targets build meanwhile.
        drop(permit);
        let since = *side.waiting_since.get_or_insert_with(Instant::now);
        if side.waited_for.as_deref() != Some(holder.holder.as_str()) {
            say(sh, spec)(format!(
                "waiting for {} (run {}, node {}), which has been building this key since {}; its record will be used when it appears (at most {} s, --claim-wait)",
                holder.holder,
                holder.run_id,
                holder.node,
                holder.since,
                sh.opts.claim_wait.as_secs()
            ));
            side.waited_for = Some(holder.holder.clone());
        }
        let deadline = since + sh.opts.claim_wait;
        match crate::claims::wait_for(
            &sh.opts.store,
            &key,
            &me,
            ttl,
            say(sh, spec),
            (generation, &holder),
            since,
            deadline,
        )
        .await
        {
            Waited::Recorded => {
                side.waited = Some((holder.holder.clone(), since.elapsed()));
                continue;
            }
            Waited::Again => continue,
            Waited::TookOver(h) => {
                side.holding = Some(h);
                return Ok(Decided::Build {
                    force,
                    permit: None,
                });
            }
            Waited::Build => {
                return Ok(Decided::Build {
                    force,
                    permit: None,
                });
            }
        }
    }
}

fn closed(e: tokio::sync::AcquireError) -> EngineError {
    EngineError::Build(format!("build slots closed: {e}"))
}

/// Looks `key` up. A store that cannot be read is a miss with a warning
/// (the target builds), unless --require-store makes it the run's error.
/// After the first such failure the store is not asked again in this run:
/// one warning, and no timeout paid per target.
async fn lookup(sh: &Shared, key: &str, warn: &impl Fn(String)) -> Result<Lookup, EngineError> {
    if sh.store_down.load(std::sync::atomic::Ordering::Relaxed) {
        return Ok(Lookup::Miss);
    }
    if !sh.busy.load(std::sync::atomic::Ordering::Relaxed)
        && let Some(found) = sh.warm_hits.lock().ok().and_then(|mut h| h.remove(key))
    {
        return Ok(found);
    }
    let k = key.to_string();
    match store_lookup(&sh.opts.store, move |s| s.get(&k)).await {
        Ok(l) => Ok(l),
        Err(e) if sh.opts.require_store => Err(e),
        Err(e) => {
            if !sh
                .store_down
                .swap(true, std::sync::atomic::Ordering::Relaxed)
            {
                warn(format!(
                    "{e}; the store is not asked again in this run: every target is looked up as a miss, so it builds"
                ));
            }
            Ok(Lookup::Miss)
        }
    }
}

/// A hit: skips on the recorded image where it can be had (on the engine,
/// pulled from the registry by digest, or in the registry alone for a
/// builder that keeps no image store); `None`, with a warning, when it
/// cannot — the target is then rebuilt.
async fn skip_on(
    sh: &Shared,
    node: &Node,
    spec: &BuildSpec,
    rec: Record,
    inputs: serde_json::Value,
    rebuilt: &[String],
    key: &str,
) -> Result<Option<Outcome>, EngineError> {
    use crate::keys::Located;
    let warn = |message: String| {
        sh.reporter.event(&Event::Warning {
            target: spec.name.clone(),
            message,
        })
    };
    let engine = engine_for(node, spec);
    let located = match seen_in_registry(sh, engine, &rec).await {
        Some(l) => l,
        None => crate::keys::locate(engine, &node.resolver, &spec.name, &rec).await,
    };
    // A platform unit and its join live in the target's repository (the
    // index is made there of the units' manifests): one recorded in another
    // repository (the tags changed) is built again there, from the layer
    // cache.
    if (spec.unit.is_some() || !spec.join.is_empty())
        && let (Located::Registry(r), Some(repo)) = (&located, spec.push_repository())
        && kiln_plan::repository_name(r) != repo
    {
        warn(format!(
            "the record for {key} names image {}, pushed as {r}, but this run pushes {} to {repo}; building it there",
            rec.image_id, spec.name
        ));
        return Ok(None);
    }
    if matches!(located, Located::Registry(_)) && engine.is_some() {
        // A pull takes time: the warm-up's keys are not reused after it.
        sh.set_busy();
    }
    let from = match &located {
        Located::Engine {
            source,
            unique_tagged,
        } => Source {
            reference: source.clone(),
            unique_tagged: *unique_tagged,
            pulled: false,
        },
        // A builder that keeps no image store skips on what the registry
        // holds: nothing to pull.
        Located::Registry(r) if engine.is_none() => Source {
            reference: r.clone(),
            unique_tagged: true,
            pulled: false,
        },
        // Pushed when it was built and still in the registry: pull it by
        // digest instead of building it again.
        Located::Registry(r) => match pull_recorded(node, &rec, r).await {
            Ok(()) => Source {
                reference: r.clone(),
                unique_tagged: false,
                pulled: true,
            },
            Err(why) => {
                warn(format!(
                    "the record for {key} names image {}, pushed as {r}, but {why}; rebuilding",
                    rec.image_id
                ));
                return Ok(None);
            }
        },
        Located::Gone if engine.is_none() => {
            warn(format!(
                "the record for {key} names image {}, which no registry holds any more; rebuilding",
                rec.image_id
            ));
            return Ok(None);
        }
        Located::Gone => {
            warn(format!(
                "the record for {key} names image {}, which the engine no longer has and no registry holds; rebuilding",
                rec.image_id
            ));
            return Ok(None);
        }
    };
    adopt(sh, node, spec, rec, inputs, rebuilt, from)
        .await
        .map(Some)
}

/// Where a builder that keeps no image store (`engine` is `None`) has the
/// recorded image, when the round of `HEAD`s asked ahead already says it:
/// the record's first tag named the recorded digest a moment ago, so its
/// repository holds that manifest, and [`crate::keys::in_registry`] would
/// ask the same registry about it once more, one level of the graph after
/// the other. `None`: not known that way (no answer asked ahead, another
/// digest, an engine to look in first); `locate` asks.
async fn seen_in_registry(
    sh: &Shared,
    engine: Option<&crate::driver::local::LocalEngine>,
    rec: &Record,
) -> Option<crate::keys::Located> {
    if engine.is_some() {
        return None;
    }
    let (digest, first) = (rec.digest.as_ref()?, rec.tags.first()?);
    match sh.peek_head(first).await? {
        Some(crate::registry::Resolution::Found(d)) if &d == digest => Some(
            crate::keys::Located::Registry(crate::keys::at_digest(first, digest)?),
        ),
        _ => None,
    }
}

/// The claimant this run is for `spec`'s key, or `None` when no claim is
/// made: claims are off, the store is down or takes no writes.
async fn claimant(sh: &Shared, node: &Node, spec: &BuildSpec) -> Option<kiln_store::Claimant> {
    sh.opts.claim_ttl?;
    if sh.store_down.load(std::sync::atomic::Ordering::Relaxed) || sh.writable().await.is_err() {
        return None;
    }
    Some(kiln_store::Claimant {
        holder: crate::claims::holder(),
        run_id: sh.opts.run_id.clone(),
        target: spec.name.clone(),
        node: node.name.clone(),
        since: now_rfc3339(),
        beat: 0,
        state: kiln_store::ClaimState::Building,
    })
}

/// How claims speak for `spec`: as its waiting line.
fn say(sh: &Shared, spec: &BuildSpec) -> std::sync::Arc<dyn Fn(String) + Send + Sync> {
    let (reporter, target) = (sh.reporter.clone(), spec.name.clone());
    std::sync::Arc::new(move |message| {
        reporter.event(&Event::Waiting {
            target: target.clone(),
            message,
        })
    })
}

/// The store holds no claims: said once per run.
fn claims_unsupported(sh: &Shared) {
    if !sh
        .claims_unsupported
        .swap(true, std::sync::atomic::Ordering::Relaxed)
    {
        sh.reporter.event(&Event::Warning {
            target: String::new(),
            message: format!(
                "record store {} cannot hold claims (it has no create-if-absent), so a run started at the same time may build the same keys too (docs/store-claims.md)",
                sh.opts.store.location()
            ),
        });
    }
}

/// A target to build, on its node, with its key.
struct Target<'a> {
    sh: &'a Shared,
    node: &'a Node,
    spec: &'a BuildSpec,
    keyed: &'a Keyed,
}

impl Target<'_> {
    fn warn(&self, message: String) {
        self.sh.reporter.event(&Event::Warning {
            target: self.spec.name.clone(),
            message,
        })
    }

    /// Builds the target in a build slot (`permit`, or one taken now) and
    /// records the build under its key (`force`: over a record there).
    async fn build_and_record(
        &self,
        inputs: serde_json::Value,
        hand_over: &BTreeMap<String, String>,
        force: bool,
        permit: Option<SemaphorePermit<'_>>,
        held: &mut Held,
    ) -> Result<Outcome, EngineError> {
        let Target {
            sh,
            node,
            spec,
            keyed,
        } = *self;
        sh.set_busy();
        held.changes = changes_since_last(sh, spec, keyed, force).await;
        // Before the first build of the run: can what is built be recorded?
        // Said once; a run that builds nothing never asks.
        let recordable = sh.writable().await.is_ok();
        let _permit = match permit {
            Some(p) => p,
            None => node.slots.acquire().await.map_err(closed)?,
        };
        let jobs = if keyed.jobs_secret {
            Some(node_jobs(node, sh.opts.gb_per_job, sh.reporter.as_ref(), &spec.name).await)
        } else {
            None
        };
        let lane = node.take_lane();
        held.slot = Some(lane.index);
        held.slot_taken = Some(Instant::now());
        held.jobs = jobs;
        sh.reporter.event(&Event::TargetStarted {
            target: spec.name.clone(),
            driver: node.driver.kind(spec, keyed.jobs_secret).into(),
            node: node.name.clone(),
            slot: held.slot,
        });
        let t0 = Instant::now();
        // Registry-resolved base images are built from the digest the key
        // names.
        let mut hand_over = hand_over.clone();
        for (image, pin) in &keyed.pins {
            hand_over
                .entry(image.clone())
                .or_insert_with(|| pin.clone());
        }
        let outcome = node
            .driver
            .build(BuildRequest {
                spec,
                hand_over: &hand_over,
                run_id: &sh.opts.run_id,
                jobs,
                reporter: sh.reporter.as_ref(),
                log: log_path(&sh.opts, &spec.name).as_deref(),
            })
            .await?;
        let (built, pushed) = match outcome {
            Ok(x) => x,
            Err(f) => return Ok(Outcome::Failed(f)),
        };
        for op in built
            .cache
            .iter()
            .filter(|o| o.kind == "export" && o.outcome != "ok")
        {
            self.warn(format!(
                "the layer-cache export failed ({}); the image is built, but a cold builder will rebuild this target's discarded stages until an export succeeds (ignore-error=true only kept it from failing the build)",
                op.error.as_deref().unwrap_or(op.outcome)
            ));
        }
        if recordable {
            self.record(&built, &pushed, inputs, force, t0.elapsed())
                .await?;
        }
        Ok(Outcome::Built(built, pushed))
    }

    /// Records a build under its key (a target without one, a run without
    /// a writable store: nothing).
    async fn record(
        &self,
        built: &Built,
        pushed: &[(String, String)],
        inputs: serde_json::Value,
        force: bool,
        took: Duration,
    ) -> Result<(), EngineError> {
        let Target {
            sh,
            node,
            spec,
            keyed,
        } = *self;
        let Some(key) = keyed.key.as_ref() else {
            return Ok(());
        };
        let record = Record {
            format: kiln_store::FORMAT.into(),
            key: key.clone(),
            target: spec.name.clone(),
            image_id: built.image_id.clone(),
            image_ref: Some(match (engine_for(node, spec), pushed.first()) {
                (None, Some((r, d))) => by_digest(r, d),
                _ => local_ref(&spec.name, &built.image_id),
            }),
            digest: pushed.first().map(|(_, d)| d.clone()),
            tags: spec.tags.clone(),
            platform: Some(keyed.manifest.platform.clone()),
            built_at: now_rfc3339(),
            node: node.name.clone(),
            duration_s: (took.as_secs_f64() * 1000.0).round() / 1000.0,
            steps_total: built.steps.total as u64,
            steps_cached: built.steps.cached as u64,
            inputs_digest: kiln_store::digest(&kiln_store::payload_bytes(&inputs)),
            check: None,
            signature: None,
        };
        match store_call(&sh.opts.store, move |s| s.put(&record, &inputs, force)).await {
            Ok(_) => Ok(()),
            // --require-store: a build that cannot be recorded stops the
            // run, as a store that cannot be written does at its start.
            Err(e) if sh.opts.require_store => Err(EngineError::Store(format!(
                "target {}: the build succeeded but could not be recorded, and --require-store was given: {e}",
                spec.name
            ))),
            Err(e) => {
                self.warn(format!(
                    "the build succeeded but could not be recorded ({e}); the next run will build it again"
                ));
                Ok(())
            }
        }
    }
}

/// What the claim on a target's key came to (cross-run deduplication,
/// `crate::claims`).
#[derive(Default)]
struct ClaimSide {
    /// This run's claim while it builds.
    holding: Option<crate::claims::Holding>,
    /// Whom this run waited for, and how long, before the record appeared.
    waited: Option<(String, Duration)>,
    /// When this target began waiting for another run's claim (the bound
    /// counts from here, across holders).
    waiting_since: Option<Instant>,
    /// The holder last said to be waited for (said once per holder).
    waited_for: Option<String>,
}

impl ClaimSide {
    /// Ends this run's claim by the outcome (`done` when built, else
    /// `failed`: a waiter builds it), and tells in a skip's reason whom
    /// this run waited for.
    async fn finish(mut self, mut r: Result<Outcome, EngineError>) -> Result<Outcome, EngineError> {
        if let (Ok(Outcome::Skipped { reason, .. }), Some((holder, waited))) =
            (&mut r, &self.waited)
        {
            reason.push_str(&format!(
                "; built by {holder} while this run waited {:.0} s",
                waited.as_secs_f64()
            ));
        }
        if let Some(h) = self.holding.take() {
            let state = match &r {
                Ok(Outcome::Built(..)) => kiln_store::ClaimState::Done,
                _ => kiln_store::ClaimState::Failed,
            };
            h.end(state).await;
        }
        r
    }
}

/// What a target's build held while it ran.
#[derive(Default)]
pub(super) struct Held {
    /// The job count handed to the build, if it was handed one.
    pub(super) jobs: Option<u32>,
    /// The node's build slot (lane) it ran in, if it took one.
    pub(super) slot: Option<usize>,
    /// Why it was built: what changed since its last recorded build.
    pub(super) changes: Vec<String>,
    /// When it took its build slot.
    pub(super) slot_taken: Option<Instant>,
}

/// Why a target is built, as `kiln why` says it: its inputs against its
/// last recorded build (one line each), `never built` without one, and
/// `--force` when forced. Best effort: a store that does not answer gives
/// no lines.
async fn changes_since_last(
    sh: &Shared,
    spec: &BuildSpec,
    keyed: &Keyed,
    force: bool,
) -> Vec<String> {
    let mut out = Vec::new();
    if sh.opts.force {
        out.push("--force: built even though its key may be recorded".to_string());
    } else if force {
        out.push(
            "its record could not be used (a damaged record, or its image is gone): rebuilt"
                .to_string(),
        );
    }
    if !keyed.volatile.is_empty() {
        out.push(format!("always built: {}", keyed.volatile.join("; ")));
    }
    let name = spec.name.clone();
    match store_lookup(&sh.opts.store, move |s| s.latest(&name)).await {
        Ok(Lookup::Hit(e)) => {
            if let Ok(m) = serde_json::from_value::<kiln_plan::key::InputManifest>(e.inputs) {
                out.extend(
                    kiln_plan::key::diff(&m, &keyed.manifest)
                        .iter()
                        .map(|c| c.to_string()),
                );
            }
        }
        Ok(Lookup::Miss) => out.push("never built before (no record of this target)".into()),
        _ => {}
    }
    out
}

/// Where a recorded image was found on the engine: a reference the engine
/// knows that names it, and how it got there.
struct Source {
    reference: String,
    /// The unique reference already points at it.
    unique_tagged: bool,
    /// Pulled from the registry in this run (by `reference`, a digest).
    pulled: bool,
}

/// A hit whose image the engine holds: no build. Restores the unique
/// reference and any requested tag that no longer points at the image,
/// pushes when asked, and refreshes the target's latest-record pointer.
async fn adopt(
    sh: &Shared,
    node: &Node,
    spec: &BuildSpec,
    rec: Record,
    inputs: serde_json::Value,
    rebuilt: &[String],
    from: Source,
) -> Result<Outcome, EngineError> {
    let id = rec.image_id.clone();
    let unique = local_ref(&spec.name, &id);
    let mut retagged = Vec::new();
    if let Some(engine) = engine_for(node, spec) {
        let to_check = (!from.unique_tagged).then_some(&unique);
        for t in to_check.into_iter().chain(spec.tags.iter()) {
            if engine.image_id(t).await.as_deref() != Some(id.as_str()) {
                engine.tag(&from.reference, t).await?;
                if t != &unique {
                    retagged.push(t.clone());
                }
            }
        }
    }
    let pulled = from.pulled.then(|| from.reference.clone());
    let mut pushed = Vec::new();
    let mut restored = Vec::new();
    if spec.push {
        // One concurrent round of `HEAD`s: what each tag names now.
        // (Or the answers the warm-up asked ahead, while they are fresh.)
        let registry = node.resolver.registry();
        let now = futures_util::future::join_all(spec.tags.iter().map(|t| async move {
            if let Some(answer) = sh.head_ahead(t).await {
                return answer;
            }
            match registry {
                Some(r) => r.resolve(t).await.ok(),
                None => None,
            }
        }))
        .await;
        for (t, now) in spec.tags.iter().zip(now) {
            let published = publish_recorded(sh, node, spec, &rec, &from, t, now).await?;
            match published {
                Published::Verified(d) => {
                    sh.reporter.event(&Event::Verified {
                        target: spec.name.clone(),
                        reference: t.clone(),
                        digest: d.clone(),
                    });
                    pushed.push((t.clone(), d));
                }
                Published::Restored { digest, was } => {
                    sh.reporter.event(&Event::Restored {
                        target: spec.name.clone(),
                        reference: t.clone(),
                        digest: digest.clone(),
                        was,
                    });
                    restored.push(t.clone());
                    pushed.push((t.clone(), digest));
                }
                Published::Pushed {
                    digest,
                    retagged: r,
                } => {
                    sh.reporter.event(&Event::Pushed {
                        target: spec.name.clone(),
                        reference: t.clone(),
                        digest: digest.clone(),
                    });
                    if r {
                        retagged.push(t.clone());
                    }
                    pushed.push((t.clone(), digest));
                }
            }
        }
    }
    let mut reason = if rebuilt.is_empty() {
        "up to date".to_string()
    } else {
        format!(
            "early cutoff: {} rebuilt to an identical image",
            rebuilt.join(", ")
        )
    };
    if let Some(p) = &pulled {
        reason.push_str(&format!(" (pulled {p})"));
    }
    if !retagged.is_empty() {
        reason.push_str(&format!(" (re-tagged {})", retagged.join(", ")));
    }
    if !restored.is_empty() {
        reason.push_str(&format!(" (restored {})", restored.join(", ")));
    }
    // A record made without a push learns the digest its image was first
    // pushed as, so that the next run verifies the tags against it instead
    // of pushing again.
    let mut rec = rec;
    let learned = rec.digest.is_none()
        && pushed
            .first()
            .is_some_and(|(_, d): &(String, String)| d.starts_with("sha256:"));
    if learned {
        rec.digest = pushed.first().map(|(_, d)| d.clone());
    }
    let digest = rec.digest.clone();
    let _ = if learned {
        store_call(&sh.opts.store, move |s| s.put(&rec, &inputs, true)).await
    } else {
        store_lookup(&sh.opts.store, move |s| s.keep(&rec, &inputs)).await
    };
    Ok(Outcome::Skipped {
        image_id: id,
        digest,
        pushed,
        reason,
        pulled,
        cutoff_by: rebuilt.to_vec(),
    })
}

/// How a skipped target's tag came to name its image in the registry.
enum Published {
    /// It already named the recorded digest.
    Verified(String),
    /// It had moved (`was`) or vanished and was pointed back at the
    /// recorded digest with a manifest put.
    Restored { digest: String, was: Option<String> },
    /// It was pushed from the engine, or re-tagged by the builder
    /// (`retagged`): a tag in a repository that never held the image.
    Pushed { digest: String, retagged: bool },
}

/// Makes the pushed tag `t` of a skipped target name its recorded image,
/// given what the registry said it names `now` (`None`: not asked, or no
/// answer). A tag at the recorded digest is left alone; a tag that moved
/// or vanished is pointed back through the registry API when its
/// repository still holds the recorded manifest (nothing is built or
/// pushed but that manifest); otherwise the image is pushed from the
/// engine, or re-tagged by a builder that keeps no image store.
async fn publish_recorded(
    sh: &Shared,
    node: &Node,
    spec: &BuildSpec,
    rec: &Record,
    from: &Source,
    t: &str,
    now: Option<crate::registry::Resolution>,
) -> Result<Published, EngineError> {
    use crate::registry::Resolution;
    if let (Some(Resolution::Found(have)), Some(d)) = (&now, &rec.digest)
        && have == d
    {
        return Ok(Published::Verified(d.clone()));
    }
    // The tag is written from here on: what was asked ahead may be stale.
    crate::registry::forget_ahead();
    if let (Some(r), Some(d), Some(now)) = (node.resolver.registry(), &rec.digest, &now)
        && let Ok(true) = r.retag(&crate::naming::by_digest(t, d), t).await
    {
        let was = match now {
            Resolution::Found(w) => Some(w.clone()),
            Resolution::Absent => None,
        };
        return Ok(Published::Restored {
            digest: d.clone(),
            was,
        });
    }
    Ok(match engine_for(node, spec) {
        Some(engine) => Published::Pushed {
            digest: engine.push(t, &spec.name, sh.reporter.as_ref()).await?.0,
            retagged: false,
        },
        // No engine: the tag is pointed at the recorded image in the
        // registry itself.
        None => {
            node.driver.retag(&from.reference, t).await?;
            Published::Pushed {
                digest: rec.digest.clone().unwrap_or_default(),
                retagged: true,
            }
        }
    })
}

/// Pulls a recorded image the engine lacks from `reference` (its
/// `repo@digest`); done once the pulled image has the recorded identity.
async fn pull_recorded(node: &Node, rec: &Record, reference: &str) -> Result<(), String> {
    let Some(engine) = &node.engine else {
        return Err("the builder keeps no image store to pull it into".into());
    };
    engine
        .pull(reference)
        .await
        .map_err(|e| format!("pulling it failed ({e})"))?;
    match engine.image_id(reference).await {
        Some(id) if id == rec.image_id => Ok(()),
        Some(id) => Err(format!("the pulled image is {id}, not the recorded one")),
        None => Err("the engine does not show the pulled image".into()),
    }
}

/// Asks at once about everything a skip will check, so a run where much
/// is recorded waits for one round of questions instead of one per level of
/// the graph: the engine (its images: one round of lookups) and the
/// registry (each pushed tag of a recorded target: one concurrent round of
/// `HEAD`s, started here and left running into `heads`). It follows the
/// records the way the run will (a hit's recorded image is its output for
/// its dependents' keys) but decides nothing: the run still looks up and
/// locates every target itself, and what changes between here and there (a
/// record that turns out stale, an image that is gone) is found then. The
/// keys it computes are returned with the upstream outputs each assumed:
/// the run reuses a key only when the upstreams really came out that way.
/// A target's latest record read ahead ([`super::Recent`]) answers the
/// lookup of its own key instead of the store. Errors only end the guess.
pub(super) async fn warm(
    node: &Node,
    specs: &[BuildSpec],
    opts: &RunOptions,
    heads: &std::sync::Mutex<HashMap<String, super::shared::Head>>,
) -> (
    HashMap<String, (Outputs, Keyed)>,
    HashMap<String, kiln_store::Lookup>,
) {
    use futures_util::FutureExt;
    let mut warmed = HashMap::new();
    let mut hits = HashMap::new();
    let mut outputs: HashMap<String, String> = HashMap::new();
    let mut refs: Vec<String> = Vec::new();
    let mut tags: Vec<String> = Vec::new();
    let names: std::collections::HashSet<&str> = specs.iter().map(|s| s.name.as_str()).collect();
    let mut settled: std::collections::HashSet<&str> = std::collections::HashSet::new();
    let mut left: Vec<&BuildSpec> = specs.iter().collect();
    'levels: while !left.is_empty() {
        // The targets whose upstreams are all settled are keyed and looked up
        // at once: their inputs are gathered side by side on the blocking
        // pool. (The plan has no cycles; should nothing be ready, the rest is
        // taken as one level.)
        let (mut ready, mut rest): (Vec<&BuildSpec>, Vec<&BuildSpec>) =
            left.into_iter().partition(|s| {
                s.deps
                    .iter()
                    .all(|d| settled.contains(d.as_str()) || !names.contains(d.as_str()))
            });
        if ready.is_empty() {
            ready = std::mem::take(&mut rest);
        }
        let looked = futures_util::future::join_all(ready.iter().map(|spec| {
            let outputs = &outputs;
            async move {
                let keyed = key_on(
                    &node.resolver,
                    spec,
                    specs,
                    outputs,
                    opts.stat_cache.clone(),
                )
                .await
                .ok()?;
                let found = match keyed.key.clone().filter(|_| keyed.volatile.is_empty()) {
                    Some(key) => {
                        // Waited for once keyed: the first keys are made
                        // while the records are still being read.
                        let recent = match &opts.recent {
                            Some(r) => super::recent::take(&r.read().await, &spec.name, &key),
                            None => None,
                        };
                        Some(match recent {
                            Some(entry) => Ok(Lookup::Hit(entry)),
                            None => store_lookup(&opts.store, move |s| s.get(&key)).await,
                        })
                    }
                    None => None,
                };
                Some((keyed, found))
            }
        }))
        .await;
        for (spec, looked) in ready.iter().zip(looked) {
            settled.insert(spec.name.as_str());
            let Some((keyed, found)) = looked else {
                continue;
            };
            warmed.insert(spec.name.clone(), (upstream_outputs(spec, &outputs), keyed));
            match found {
                Some(Ok(Lookup::Hit(entry))) => {
                    // The skip checks the unique reference and every tag (of
                    // an image the engine would hold).
                    if !spec.registry_only() {
                        refs.push(local_ref(&spec.name, &entry.record.image_id));
                        tags.extend(spec.tags.iter().cloned());
                    }
                    // And, pushing, what each tag names in its registry.
                    if spec.push
                        && entry.record.digest.is_some()
                        && let Some(registry) = node.resolver.registry()
                        && let Ok(mut heads) = heads.lock()
                    {
                        for t in &spec.tags {
                            let (r, tag) = (registry.clone(), t.clone());
                            let head = async move {
                                let answer = r.resolve(&tag).await.ok();
                                (Instant::now(), answer)
                            }
                            .boxed()
                            .shared();
                            tokio::spawn(head.clone());
                            heads.insert(t.clone(), head);
                        }
                    }
                    outputs.insert(spec.name.clone(), entry.record.image_id.clone());
                    hits.insert(entry.record.key.clone(), Lookup::Hit(entry));
                }
                Some(Ok(_)) | None => {}
                // A store that does not answer: the run finds out (and says
                // so) itself; the guess stops here rather than wait per
                // target.
                Some(Err(_)) => break 'levels,
            }
        }
        left = rest;
    }
    if let Some(engine) = &node.engine {
        let refs: Vec<&str> = refs.iter().map(String::as_str).collect();
        let tags: Vec<&str> = tags.iter().map(String::as_str).collect();
        engine.prefetch_recorded(&refs, &tags).await;
    }
    (warmed, hits)
}
