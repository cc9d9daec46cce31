package io.gpusched.examples;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.Test;

/** Every IDE example's main runs and prints what its README line promises. */
class ExamplesTest {

    static String run(ThrowingMain main) throws Exception {
        PrintStream old = System.out;
        ByteArrayOutputStream buf = new ByteArrayOutputStream();
        System.setOut(new PrintStream(buf, true, StandardCharsets.UTF_8));
        try {
            main.run();
        } finally {
            System.setOut(old);
        }
        return buf.toString(StandardCharsets.UTF_8);
    }

    interface ThrowingMain {
        void run() throws Exception;
    }

    @Test
    void examplesRun() throws Exception {
        assertThat(run(() -> Quickstart.main(new String[0]))).contains("got [GPU-");
        assertThat(run(() -> DiscoverNode.main(new String[0]))).contains("provider nvml");
        assertThat(run(() -> TopologyAwareAllocation.main(new String[0])))
                .contains("topology: 4 GPUs -> [4, 5, 6, 7], 9 NVLinks among them");
        assertThat(run(() -> SharedInference.main(new String[0]))).contains("MPS memory 0=6144M");
        assertThat(run(() -> CudaEnvironmentExample.main(new String[0]))).contains("\"variables\"");
        assertThat(run(() -> WorkflowPlan.main(new String[0]))).contains("stage 2 evaluate");
        assertThat(run(() -> CustomStrategy.main(new String[0]))).contains("high-first gives [7, 6]");
        assertThat(run(() -> IsolateJob.main(new String[0]))).containsAnyOf("fenced ", "isolation unavailable here");
    }
}
