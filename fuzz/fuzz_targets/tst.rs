#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(
    init: {
        tessera_fuzz::write_seeds("tst");
    },
    |data: &[u8]| {
        let _ = tessera_fuzz::harness::tst(tessera_fuzz::env(), data);
    }
);
