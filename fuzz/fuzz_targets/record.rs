//! The record decoder of the record store (`kiln_store::objects::check_record`),
//! with no key and with a key; a record it accepts must survive being sealed,
//! written and read again (what the store does on every write).
//!
//! Input: raw bytes (the decoder takes bytes).
#![no_main]

use kiln_store::objects::check_record;
use libfuzzer_sys::fuzz_target;

const KEY: &str = "k1:0000000000000000000000000000000000000000000000000000000000000000";

fuzz_target!(|data: &[u8]| {
    let any = check_record(data, None);
    let keyed = check_record(data, Some(KEY));
    let Ok(record) = any else {
        assert!(keyed.is_err(), "accepted with a key but not without");
        return;
    };
    assert_eq!(keyed.is_ok(), record.key == KEY);
    assert!(record.check.is_none(), "the seal is not handed to readers");
    let again = check_record(data, Some(&record.key)).expect("its own key is accepted");
    assert_eq!(again, record);

    // Seal, write and read back as the store does.
    let sealed = record.sealed();
    sealed.verify_seal().expect("a fresh seal verifies");
    let bytes = serde_json::to_vec(&sealed).expect("a record serializes");
    let back = check_record(&bytes, Some(&record.key))
        .unwrap_or_else(|e| panic!("a sealed record is not read back: {e}"));
    assert_eq!(back, record, "a sealed record reads back changed");
});
