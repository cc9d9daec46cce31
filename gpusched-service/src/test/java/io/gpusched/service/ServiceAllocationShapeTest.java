package io.gpusched.service;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.gpusched.core.Allocation;
import io.gpusched.core.AllocationView;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.UserQuotas;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The node service's allocations are gpu-core's one shape ({@link AllocationView}, the OpenAPI document's
 * {@code Allocation}, which gpusched-cli's {@code AllocationSchemaTest} checks field for field): the same names in
 * the same order, the placement certificate among them, on the service's own routes over its socket, and after them
 * the two fields of every bounded answer ({@code truncatedFields}, {@code labelsOmitted}).
 */
class ServiceAllocationShapeTest {
    private static final ObjectMapper JSON = new ObjectMapper();

    @Test
    void theServicesAllocationRoutesAnswerTheOneShape(@TempDir Path tmp) throws Exception {
        ServiceSocketTest.needCurl();
        try (ServiceBed bed = new ServiceBed(tmp, NodeServiceTest.config(UserQuotas.none()))) {
            bed.start();
            bed.serve();
            Allocation a = bed.scheduler.allocate(GpuRequest.builder().count(2).owner("alice")
                    .maxDuration(Duration.ofHours(1)).label("team", "vision").build());
            List<String> names = new ArrayList<>(AllocationView.of(a, Instant.now()).toMap().keySet());
            names.addAll(List.of("truncatedFields", "labelsOmitted")); // what the console's bound cut (nothing here)
            ServiceBed.Answer list = bed.curl(null, "http://localhost/api/v1/allocations");
            assertThat(list.status()).as(list.body()).isEqualTo(200);
            ServiceBed.Answer one = bed.curl(null, "http://localhost/api/v1/allocations/" + a.id());
            assertThat(one.status()).as(one.body()).isEqualTo(200);
            for (JsonNode n : List.of(JSON.readTree(list.body()).get(0), JSON.readTree(one.body()))) {
                List<String> seen = new ArrayList<>();
                n.fieldNames().forEachRemaining(seen::add);
                assertThat(seen).as("the service's allocation: " + n).isEqualTo(names);
                assertThat(n.get("placement").asText()).isEqualTo(a.placement().describe());
                assertThat(n.get("devices").toString()).isEqualTo(a.deviceIndices().toString().replace(" ", ""));
            }
        }
    }
}
