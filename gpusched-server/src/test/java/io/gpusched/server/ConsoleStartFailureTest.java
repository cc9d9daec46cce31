package io.gpusched.server;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.gpusched.core.GpuInventories;
import io.gpusched.core.GpuScheduler;
import io.gpusched.core.sim.SimulatedGpuInventory;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A start() that fails after it bound the port (here: its timers were already shut down by close(), so scheduling the
 * sampler throws after the HTTP server started) stops the HTTP server it opened: the port is free again, checked by
 * binding it ourselves.
 */
class ConsoleStartFailureTest {
    @Test
    void aStartThatThrowsAfterTheBindLeavesNothingListening(@TempDir Path state) throws Exception {
        InetAddress lo = InetAddress.getLoopbackAddress();
        int port;
        try (ServerSocket probe = new ServerSocket()) { // a free port to name (start() must bind it, then fail)
            probe.bind(new InetSocketAddress(lo, 0));
            port = probe.getLocalPort();
        }
        SimulatedGpuInventory inventory = GpuInventories.simulated("pcie-4xa10");
        try (GpuScheduler scheduler = GpuScheduler.builder().inventory(inventory).auditLogging(false).build()) {
            ConsoleServer s = ConsoleServer.builder().scheduler(scheduler).inventory(inventory).stateDir(state)
                    .listen(new InetSocketAddress(lo, port)).build();
            s.close();
            assertThatThrownBy(s::start).isInstanceOf(RuntimeException.class);
            assertThatThrownBy(s::address).isInstanceOf(IllegalStateException.class)
                    .hasMessageContaining("not listening");
            try (ServerSocket again = new ServerSocket()) {
                again.bind(new InetSocketAddress(lo, port)); // throws BindException if the console still listened
                assertThat(again.isBound()).isTrue();
            }
            s.close(); // and a second close is harmless
        } finally {
            inventory.close();
        }
    }
}
