//! libFuzzer entry point for [`comet_fuzz::grpc::grpc`]; the checks live in the library so the
//! stable `replay` harness runs exactly the same code.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| comet_fuzz::grpc::grpc(data));
