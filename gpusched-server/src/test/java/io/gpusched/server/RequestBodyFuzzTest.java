package io.gpusched.server;

import com.code_intelligence.jazzer.junit.FuzzTest;

/**
 * The request-body reader of {@code POST /api/v1/allocations} (console and node socket) under coverage-guided
 * fuzzing ({@link RequestBodyFuzzer} states the contract). Without {@code JAZZER_FUZZ} it runs over the committed
 * inputs ({@code src/test/resources/io/gpusched/server/RequestBodyFuzzTestInputs/requestBody/}), as a regression
 * test in {@code ./mvnw verify}.
 */
class RequestBodyFuzzTest {

    @FuzzTest(maxDuration = "5m")
    void requestBody(byte[] input) {
        RequestBodyFuzzer.fuzzerTestOneInput(input);
    }
}
