package io.gpusched.server.adversarial;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.gpusched.core.Allocation;
import io.gpusched.core.GpuInventories;
import io.gpusched.core.GpuRequests;
import io.gpusched.core.GpuScheduler;
import io.gpusched.core.sim.SimulatedGpuInventory;
import io.gpusched.server.ConsoleServer;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Two schedulers on one node ledger (the console's and another "process"'s): the console shows, refuses around and
 * releases the other's allocation; the other scheduler, not the console, is asked what happened.
 */
@Tag("adversarial")
class ConsoleOtherProcessAttackTest {
    static final ObjectMapper JSON = new ObjectMapper();

    @TempDir
    Path tmp;

    @Test
    void anotherProcessesAllocationIsShownCountedAgainstAndReleasable() throws Exception {
        Path ledger = Files.createDirectory(tmp.resolve("ledger"));
        Path console = Files.createDirectory(tmp.resolve("console"));
        SimulatedGpuInventory invA = GpuInventories.simulated("pcie-4xa10");
        SimulatedGpuInventory invB = GpuInventories.simulated("pcie-4xa10");
        try (GpuScheduler a = GpuScheduler.builder().inventory(invA).auditLogging(false).stateDir(ledger).build();
             GpuScheduler b = GpuScheduler.builder().inventory(invB).auditLogging(false).stateDir(ledger).build();
             ConsoleServer c = ConsoleServer.builder().scheduler(a).inventory(invA).stateDir(console)
                     .refresh(a::refresh).sampleInterval(Duration.ofMillis(100))
                     .listen(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0)).build().start()) {
            RawHttp http = new RawHttp(c.address());
            String auth = "Authorization: Bearer " + c.token().value();
            Allocation other = b.allocate(GpuRequests.fromCliFlags("--gpu=2", "--owner=other-process"));

            long deadline = System.nanoTime() + Duration.ofSeconds(60).toNanos();
            boolean shown = false;
            while (!shown && System.nanoTime() < deadline) {
                shown = http.req("GET", "/api/v1/allocations", null).body().contains(other.id());
                Thread.sleep(50);
            }
            assertThat(shown).as("the other process's allocation in /api/v1/allocations within 60 s").isTrue();
            JsonNode one = JSON.readTree(http.req("GET", "/api/v1/allocations/" + other.id(), null).body());
            assertThat(one.path("owner").asText()).isEqualTo("other-process");
            assertThat(one.path("devices").size()).isEqualTo(2);

            // three GPUs cannot be had while the other holds two of four: refused with a reason code, nothing taken
            RawHttp.Resp refused = http.req("POST", "/api/v1/allocations", "{\"flags\": [\"--gpu=3\"]}", auth);
            assertThat(refused.status()).as("%s", refused).isEqualTo(409);
            assertThat(JSON.readTree(refused.body()).path("reason").asText()).isNotBlank();
            b.refresh();
            assertThat(b.allocations()).extracting(Allocation::id).containsExactly(other.id());

            // released through the console; the other scheduler sees it gone
            RawHttp.Resp del = http.req("DELETE", "/api/v1/allocations/" + other.id(), null, auth);
            assertThat(del.status()).as("%s", del).isEqualTo(200);
            assertThat(JSON.readTree(del.body()).path("released").asBoolean()).isTrue();
            b.refresh();
            assertThat(b.allocations()).isEmpty();
            RawHttp.Resp again = http.req("DELETE", "/api/v1/allocations/" + other.id(), null, auth);
            assertThat(again.status()).as("%s", again).isIn(200, 404);
            if (again.status() == 200) {
                assertThat(JSON.readTree(again.body()).path("released").asBoolean()).isFalse();
            }
            // and the four GPUs can be had again by the other process
            b.allocate(GpuRequests.fromCliFlags("--gpu=4", "--owner=other-process"));
        } finally {
            invA.close();
            invB.close();
        }
    }
}
