package io.gpusched.cuda.fuzz;

import com.code_intelligence.jazzer.junit.FuzzTest;

/**
 * The gpu-cuda parsers under coverage-guided fuzzing. Under {@code ./mvnw verify} each method runs as a regression
 * test over its committed inputs ({@code src/test/resources/io/gpusched/cuda/fuzz/CudaParsersFuzzTestInputs/<method>/}:
 * seeds and every finding kept); with {@code JAZZER_FUZZ=1} one method fuzzes; {@code .ci/fuzz} runs the campaign.
 */
class CudaParsersFuzzTest {

    @FuzzTest
    void versionJson(byte[] input) {
        VersionJsonFuzzer.fuzzerTestOneInput(input);
    }

    @FuzzTest
    void versionTxt(byte[] input) {
        VersionTxtFuzzer.fuzzerTestOneInput(input);
    }

    @FuzzTest
    void cudaH(byte[] input) {
        CudaHeaderFuzzer.fuzzerTestOneInput(input);
    }

    @FuzzTest
    void pipMetadata(byte[] input) {
        PipMetadataFuzzer.fuzzerTestOneInput(input);
    }

    @FuzzTest
    void cudaRequirement(byte[] input) {
        CudaRequirementFuzzer.fuzzerTestOneInput(input);
    }
}
