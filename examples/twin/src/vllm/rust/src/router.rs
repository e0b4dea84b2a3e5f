// router.rs (twin vllm-rs)
pub fn route(prompt_len: usize) -> usize { prompt_len % 8 }
