package io.gpusched.nvml.fuzz;

import com.code_intelligence.jazzer.junit.FuzzTest;

/**
 * The gpu-nvml text parsers under coverage-guided fuzzing. Under {@code ./mvnw verify} each method runs as a
 * regression test over its committed inputs ({@code src/test/resources/io/gpusched/nvml/fuzz/NvmlParsersFuzzTestInputs/
 * <method>/}); with {@code JAZZER_FUZZ=1} one method fuzzes; {@code .ci/fuzz} runs the campaign.
 */
class NvmlParsersFuzzTest {

    @FuzzTest
    void nvidiaSmiXml(byte[] input) {
        NvidiaSmiXmlFuzzer.fuzzerTestOneInput(input);
    }

    @FuzzTest
    void procDriver(byte[] input) {
        ProcDriverNvidiaFuzzer.fuzzerTestOneInput(input);
    }
}
