package io.gpusched.cli;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.core.GpuInventories;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.Optional;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

class DemoTest {

    static java.util.List<String> profiles() {
        return GpuInventories.simulatedProfiles();
    }

    @ParameterizedTest
    @MethodSource("profiles")
    void demoRunsOnEverySimulatedProfile(String profile) {
        ByteArrayOutputStream buf = new ByteArrayOutputStream();
        int rc = Demo.run(new PrintStream(buf, true, StandardCharsets.UTF_8), Optional.of(profile));
        String out = buf.toString(StandardCharsets.UTF_8);
        assertThat(rc).isZero();
        assertThat(out).contains("Using simulated node simulated:" + profile)
                .contains("GPUs:").contains("Links:")
                .contains("-> refused (INSUFFICIENT_MEMORY)")
                .contains("-> refused (NO_MATCHING_DEVICE)")
                .contains("Released; 0 allocations left");
        assertThat(out.lines().filter(l -> l.startsWith("  -> a")).count()).isEqualTo(5);
    }

    @Test
    void theDemoSaysWhichNodeItUses() {
        ByteArrayOutputStream buf = new ByteArrayOutputStream();
        int rc = Demo.run(new PrintStream(buf, true, StandardCharsets.UTF_8), Optional.empty());
        String out = buf.toString(StandardCharsets.UTF_8);
        assertThat(rc).isZero();
        if (HostGpus.anyProviderAvailable()) {
            assertThat(out.lines().findFirst().orElseThrow()).matches("Detected \\d+ GPUs through backend .*\\.");
        } else {
            assertThat(out.lines().findFirst().orElseThrow())
                    .startsWith("No GPU backend is available here")
                    .endsWith("running on a simulated dgx1-v100 node instead.");
        }
        assertThat(out).contains("Released; 0 allocations left");
    }

    @Test
    void dgx1LinkMatrixMatchesNvidiaSmi() {
        var inv = GpuInventories.simulated("dgx1-v100");
        String m = Tables.topology(inv.devices(), inv.topology());
        assertThat(m.lines().skip(1).findFirst().orElseThrow().split("\\s+"))
                .containsExactly("GPU0", "X", "NV1", "NV1", "NV2", "NV2", "SYS", "SYS", "SYS", "0");
        var amd = GpuInventories.simulated("mi210-8x");
        assertThat(Tables.topology(amd.devices(), amd.topology())).contains("XG1");
    }

    @Test
    void commandRunsDemoAndReportsBadInputInOneLine() {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        ByteArrayOutputStream err = new ByteArrayOutputStream();
        int rc = GpuschedCommand.commandLine(new PrintStream(out, true, StandardCharsets.UTF_8),
                new PrintStream(err, true, StandardCharsets.UTF_8)).execute("--simulate", "nope", "demo");
        assertThat(rc).isEqualTo(2);
        assertThat(err.toString(StandardCharsets.UTF_8).strip())
                .startsWith("gpusched: unknown simulated profile \"nope\"").doesNotContain("\tat ");
    }
}
