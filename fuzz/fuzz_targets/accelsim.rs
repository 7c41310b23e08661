#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(
    init: {
        tessera_fuzz::write_seeds("accelsim");
    },
    |data: &[u8]| {
        let _ = tessera_fuzz::harness::accelsim(tessera_fuzz::env(), data);
    }
);
