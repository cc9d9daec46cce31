package io.gpusched.server;

import static org.assertj.core.api.Assertions.assertThat;

import io.gpusched.core.GpuInventories;
import io.gpusched.core.GpuScheduler;
import io.gpusched.core.sim.SimulatedGpuInventory;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The console sets the JDK server's JVM-wide properties only where it has no per-server way and only when the host
 * left them unset: checked in fresh child JVMs (the properties are per JVM), one that sets its own values at launch
 * and one that sets none. Loading and building the console changes nothing; only start() may.
 */
class JdkServerPropertiesTest {

    /** Child JVM: prints the properties after loading and building, and again after start. */
    public static final class Child {
        public static void main(String[] args) throws Exception {
            Path state = Path.of(args[0]);
            SimulatedGpuInventory inv = GpuInventories.simulated("pcie-4xa10");
            try (GpuScheduler s = GpuScheduler.builder().inventory(inv).auditLogging(false).build()) {
                ConsoleServer c = ConsoleServer.builder().scheduler(s).inventory(inv).stateDir(state)
                        .listen(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0)).build();
                System.out.println("built " + props());
                c.start();
                System.out.println("started " + props());
                c.close();
            }
        }

        static String props() {
            return "maxReqTime=" + System.getProperty("sun.net.httpserver.maxReqTime") + " maxReqHeaderSize="
                    + System.getProperty("sun.net.httpserver.maxReqHeaderSize") + " maxRspTime="
                    + System.getProperty("sun.net.httpserver.maxRspTime");
        }
    }

    static String child(Path state, String... jvmArgs) throws Exception {
        Files.createDirectories(state);
        List<String> cmd = new ArrayList<>(List.of(Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                "-XX:TieredStopAtLevel=1"));
        cmd.addAll(List.of(jvmArgs));
        cmd.addAll(List.of("-cp", System.getProperty("java.class.path"), Child.class.getName(), state.toString()));
        Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
        p.getOutputStream().close();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertThat(p.waitFor(120, TimeUnit.SECONDS)).as(out).isTrue();
        assertThat(p.exitValue()).as(out).isZero();
        return out;
    }

    @Test
    void aHostsOwnValuesAreNeverOverridden(@TempDir Path dir) throws Exception {
        String out = child(dir.resolve("a"), "-Dsun.net.httpserver.maxReqTime=77",
                "-Dsun.net.httpserver.maxReqHeaderSize=1234");
        assertThat(out).contains("built maxReqTime=77 maxReqHeaderSize=1234 maxRspTime=null")
                .contains("started maxReqTime=77 maxReqHeaderSize=1234 maxRspTime=null");
    }

    @Test
    void unsetOnlyTheRequestTimeLimitIsSetAndOnlyAtStart(@TempDir Path dir) throws Exception {
        String out = child(dir.resolve("b"));
        assertThat(out).contains("built maxReqTime=null maxReqHeaderSize=null maxRspTime=null")
                .contains("started maxReqTime=" + ConsoleServer.JDK_MAX_REQ_TIME_SECONDS
                        + " maxReqHeaderSize=null maxRspTime=null");
    }
}
