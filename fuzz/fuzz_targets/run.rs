#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(
    init: {
        tessera_fuzz::write_seeds("run");
    },
    |data: &[u8]| {
        let _ = tessera_fuzz::harness::run(tessera_fuzz::env(), data);
    }
);
