// The SDK's unit tests (weir.test.mjs) again, as the SDK runs on QuickJS,
// weir-build's default engine: see there.
//
// Run: node --test sdk/tests/js/ (scripts/test does).
globalThis.WEIR_TEST_ENGINE = 'quickjs';
await import('./weir.test.mjs');
