#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(
    init: {
        tessera_fuzz::write_seeds("config");
    },
    |data: &[u8]| {
        let _ = tessera_fuzz::harness::config(tessera_fuzz::env(), data);
    }
);
