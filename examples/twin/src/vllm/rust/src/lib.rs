// vllm-rs (twin): the Rust tokenizer front end, built on plain busybox.
pub fn detokenize(ids: &[u32]) -> String { ids.iter().map(|i| i.to_string()).collect() }
