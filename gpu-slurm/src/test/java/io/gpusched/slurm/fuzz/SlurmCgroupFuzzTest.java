package io.gpusched.slurm.fuzz;

import com.code_intelligence.jazzer.junit.FuzzTest;

/**
 * The Slurm job parser of {@code /proc/<pid>/cgroup} under coverage-guided fuzzing ({@link ProcCgroupFuzzer}). Without
 * {@code JAZZER_FUZZ} it runs over the committed inputs
 * ({@code src/test/resources/io/gpusched/slurm/fuzz/SlurmCgroupFuzzTestInputs/procCgroup/}).
 */
class SlurmCgroupFuzzTest {

    @FuzzTest
    void procCgroup(byte[] input) {
        ProcCgroupFuzzer.fuzzerTestOneInput(input);
    }
}
