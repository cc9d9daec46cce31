package io.gpusched.rocm.fuzz;

import com.code_intelligence.jazzer.junit.FuzzTest;

/**
 * The KFD topology reader under coverage-guided fuzzing. Under {@code ./mvnw verify} it runs as a regression test
 * over its committed inputs ({@code src/test/resources/io/gpusched/rocm/fuzz/RocmParsersFuzzTestInputs/kfdProperties/});
 * with {@code JAZZER_FUZZ=1} it fuzzes; {@code .ci/fuzz} runs the campaign.
 */
class RocmParsersFuzzTest {

    @FuzzTest
    void kfdProperties(byte[] input) {
        KfdPropertiesFuzzer.fuzzerTestOneInput(input);
    }
}
