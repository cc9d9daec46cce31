package io.gpusched.core.fuzz;

import com.code_intelligence.jazzer.junit.FuzzTest;

/**
 * The gpu-core parsers under coverage-guided fuzzing. Under {@code ./mvnw verify} each method runs as a regression
 * test over its committed inputs ({@code src/test/resources/io/gpusched/core/fuzz/CoreParsersFuzzTestInputs/<method>/}:
 * seeds and every finding kept); with {@code JAZZER_FUZZ=1} one method fuzzes. The long campaign runs the same
 * targets through {@code .ci/fuzz}.
 */
class CoreParsersFuzzTest {

    @FuzzTest
    void memorySize(byte[] input) {
        MemorySizeFuzzer.fuzzerTestOneInput(input);
    }

    @FuzzTest
    void gpuTarget(byte[] input) {
        GpuTargetFuzzer.fuzzerTestOneInput(input);
    }

    @FuzzTest
    void cliFlags(byte[] input) {
        CliFlagsFuzzer.fuzzerTestOneInput(input);
    }

    @FuzzTest
    void resources(byte[] input) {
        ResourcesFuzzer.fuzzerTestOneInput(input);
    }

    @FuzzTest
    void gpuConfig(byte[] input) {
        GpuConfigFuzzer.fuzzerTestOneInput(input);
    }

    @FuzzTest
    void nodeDescriptions(byte[] input) {
        NodeDescriptionsFuzzer.fuzzerTestOneInput(input);
    }

    @FuzzTest
    void procDevices(byte[] input) {
        ProcDevicesFuzzer.fuzzerTestOneInput(input);
    }

    @FuzzTest
    void charMajors(byte[] input) {
        CharMajorsFuzzer.fuzzerTestOneInput(input);
    }

    @FuzzTest
    void terminalText(byte[] input) {
        TerminalTextFuzzer.fuzzerTestOneInput(input);
    }
}
