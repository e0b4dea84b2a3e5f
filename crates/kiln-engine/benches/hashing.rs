//! Context hashing throughput (`harness = false`, std only).
//!
//! Writes a 1 GiB context (256 files of 4 MiB plus 4,096 files of 1 KiB) to
//! a temporary directory, then measures on a warm page cache:
//! - `read`: reading every byte without hashing (the baseline: the memory
//!   bandwidth the hasher cannot beat);
//! - `hash`: kiln's hashing (`kiln_engine::hashing::hash_paths`, blake3,
//!   one worker per core) with an empty stat cache;
//! - `no-op`: the same pass with the stat cache filled — it must read no
//!   file content.
//!
//! Run: `cargo bench -p kiln-engine --bench hashing` (median of 5 runs each).
//! Goal: hashing >= 1 GB/s, and a no-op pass reading 0 bytes.

use std::io::Read;
use std::path::Path;
use std::time::Instant;

use kiln_engine::hashing::{StatCache, hash_paths};

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
    v[v.len() / 2]
}

fn read_all(root: &Path, paths: &[String]) -> u64 {
    let mut buf = vec![0u8; 1 << 20];
    let mut n = 0u64;
    for p in paths {
        let mut f = std::fs::File::open(root.join(p)).expect("open");
        loop {
            let k = f.read(&mut buf).expect("read");
            if k == 0 {
                break;
            }
            n += k as u64;
        }
    }
    n
}

fn main() {
    let root = std::env::temp_dir().join(format!("kiln-hash-bench-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(root.join("big")).expect("mkdir");
    std::fs::create_dir_all(root.join("small")).expect("mkdir");
    let mut paths = Vec::new();
    let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
    let mut block = vec![0u8; 4 << 20];
    for i in 0..256 {
        for chunk in block.chunks_mut(8) {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            chunk.copy_from_slice(&seed.to_le_bytes()[..chunk.len()]);
        }
        let p = format!("big/{i:04}.bin");
        std::fs::write(root.join(&p), &block).expect("write");
        paths.push(p);
    }
    for i in 0..4096 {
        let p = format!("small/{i:05}.txt");
        std::fs::write(root.join(&p), vec![(i % 251) as u8; 1024]).expect("write");
        paths.push(p);
    }
    let total: u64 = 256 * (4 << 20) + 4096 * 1024;
    let threads = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    // Warm the page cache.
    let _ = read_all(&root, &paths);

    let mut read_s = Vec::new();
    let mut hash_s = Vec::new();
    let mut noop_s = Vec::new();
    let mut noop_bytes = 0;
    for _ in 0..5 {
        let t = Instant::now();
        assert_eq!(read_all(&root, &paths), total);
        read_s.push(t.elapsed().as_secs_f64());

        let cache = StatCache::default();
        let t = Instant::now();
        let (_, st) = hash_paths(&root, &paths, &cache, threads).expect("hash");
        hash_s.push(t.elapsed().as_secs_f64());
        assert_eq!(st.read_bytes, total);

        let t = Instant::now();
        let (_, st) = hash_paths(&root, &paths, &cache, threads).expect("hash");
        noop_s.push(t.elapsed().as_secs_f64());
        noop_bytes = noop_bytes.max(st.read_bytes);
    }
    let gb = total as f64 / 1e9;
    let (r, h, n) = (median(read_s), median(hash_s), median(noop_s));
    println!(
        "context: {:.2} GB in {} files; {threads} worker(s); medians of 5",
        gb,
        paths.len()
    );
    println!("{:<28} {:>9} {:>10}", "pass", "seconds", "GB/s");
    println!("{:<28} {:>9.3} {:>10.2}", "read only (baseline)", r, gb / r);
    println!(
        "{:<28} {:>9.3} {:>10.2}",
        "hash, empty stat cache",
        h,
        gb / h
    );
    println!("{:<28} {:>9.3} {:>10}", "no-op, stat cache filled", n, "-");
    println!(
        "hash / read time ratio: {:.2}; no-op / hash time ratio: {:.4}; no-op bytes read: {noop_bytes}",
        h / r,
        n / h
    );
    println!(
        "goal >= 1 GB/s: {}",
        if gb / h >= 1.0 { "met" } else { "NOT met" }
    );
    let _ = std::fs::remove_dir_all(&root);
}
