package io.gpusched.service.adversarial.hostile;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.gpusched.core.Allocation;
import io.gpusched.core.AllocationView;
import io.gpusched.core.GpuConfig;
import io.gpusched.core.GpuRequest;
import io.gpusched.core.GpuRequests;
import io.gpusched.service.ServiceBed;
import io.gpusched.testing.LocalUsers;
import io.gpusched.testing.LocalUsers.User;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Issue 36 on the node socket: the answers that carry one allocation ({@code GET /api/v1/allocations/{id}}, the
 * {@code 201} of an allocate, the {@code 200} of a renew) are bounded as the lists are, whatever the allocation holds:
 * an allocation at every limit of the request validation (an owner of 128 and a job id of 256 four-byte characters,
 * 64 labels of 63 + 256 of them: over 80 KB of JSON) is answered in under 20 KB, and the answer says what was cut
 * ({@code truncatedFields}) and how many labels were left out ({@code labelsOmitted}). Every request is curl run as a
 * real user.
 */
@Tag("adversarial")
@Timeout(value = 3, unit = TimeUnit.MINUTES)
class BoundedAllocationAnswersTest {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final String WIDE = new String(Character.toChars(0x1F600)); // 4 bytes in UTF-8
    /** What a bounded answer of one allocation stays under, in bytes. */
    private static final int BOUND = 20_000;

    /** @return the flags of an allocation whose job id and labels are at their validation limits */
    private static List<String> maximal(String device) {
        List<String> f = new ArrayList<>(List.of("--devices=" + device, "--lease=2h",
                "--job=" + WIDE.repeat(GpuRequest.MAX_JOB_ID_LENGTH)));
        for (int l = 0; l < GpuRequest.MAX_LABELS; l++) {
            f.add("--label=" + WIDE.repeat(GpuRequest.MAX_LABEL_KEY_LENGTH - 2) + String.format("%02d", l) + "="
                    + WIDE.repeat(GpuRequest.MAX_LABEL_VALUE_LENGTH));
        }
        return f;
    }

    private static int bytes(String s) {
        return s.getBytes(StandardCharsets.UTF_8).length;
    }

    private static List<String> texts(JsonNode a) {
        List<String> out = new ArrayList<>();
        a.forEach(x -> out.add(x.asText()));
        return out;
    }

    /** Checks one answer: bounded, 32 labels kept, each cut value marked, and the fields saying what was cut. */
    private static void bounded(ServiceBed.Answer r, String what, List<String> cut, int labels) throws Exception {
        assertThat(bytes(r.body())).as(what + ", bytes").isLessThan(BOUND);
        JsonNode a = JSON.readTree(r.body());
        assertThat(a.has("truncatedFields") && a.has("labelsOmitted")).as(what + " says what was cut: " + r.body())
                .isTrue();
        assertThat(texts(a.get("truncatedFields"))).as(what + ": truncatedFields").isEqualTo(cut);
        assertThat(a.get("labelsOmitted").asInt(-1)).as(what + ": labelsOmitted").isEqualTo(Math.max(0, labels - 32));
        assertThat(a.get("labels").size()).as(what + ": labels kept").isEqualTo(Math.min(32, labels));
        for (String f : List.of("owner", "jobId")) {
            String v = a.get(f).asText();
            assertThat(bytes(v)).as(what + ": " + f + ", bytes").isLessThanOrEqualTo(256 + 10);
            assertThat(v.endsWith(")") && v.contains("\u2026(+")).as(what + ": " + f + " marked cut: " + v)
                    .isEqualTo(cut.contains(f));
        }
    }

    @Test
    void singleAllocationAnswersAreBoundedAndSayWhatWasCut(@TempDir Path tmp) throws Exception {
        assumeTrue(LocalUsers.available(), "skipped: real users need root, useradd and setpriv");
        assumeTrue(LocalUsers.run(List.of("sh", "-c", "command -v curl"), 10).exit() == 0, "skipped: needs curl");
        try (ServiceBed bed = new ServiceBed(tmp, GpuConfig.defaults())) {
            User alice = bed.accounts.user("alice");
            User bob = bed.accounts.user("bob");
            bed.start();
            bed.serve();
            String list = "http://localhost/api/v1/allocations";

            // through the socket (its body is at most 16 KiB): a job id at its limit and 40 short labels
            StringBuilder body = new StringBuilder("{\"flags\":[\"--devices=0\",\"--job=" + WIDE.repeat(256) + "\"");
            for (int l = 0; l < 40; l++) {
                body.append(",\"--label=k").append(l).append("=v\"");
            }
            ServiceBed.Answer made = bed.curl(alice, "-X", "POST", "--data", body.append("]}").toString(), list);
            assertThat(made.status()).as(made.body()).isEqualTo(201);
            bounded(made, "the 201 of an allocate", List.of("jobId", "labels"), 40);
            JsonNode m = JSON.readTree(made.body());
            assertThat(m.get("jobId").asText()).isEqualTo(WIDE.repeat(64) + "\u2026(+192)");
            List<String> held = new ArrayList<>(bed.scheduler.allocation(m.get("id").asText()).orElseThrow()
                    .request().labels().keySet());
            List<String> kept = new ArrayList<>();
            m.get("labels").fieldNames().forEachRemaining(kept::add);
            assertThat(kept).as("the first 32 labels, in their order").isEqualTo(held.subList(0, 32));

            // at every limit, written by another process of the node: alice's, and one whose owner is at its limit
            Allocation alices = bed.scheduler.allocate(GpuRequests.fromCliFlags(maximal("1"))
                    .withOwner(alice.name(), alice.uid()));
            Allocation wide = bed.scheduler.allocate(GpuRequests.fromCliFlags(maximal("2"))
                    .withOwner(WIDE.repeat(GpuRequest.MAX_OWNER_LENGTH), bob.uid()));
            String whole = JSON.writeValueAsString(AllocationView.of(wide, Instant.now()).toMap());
            assertThat(bytes(whole)).as("the allocation unbounded, bytes").isGreaterThan(80_000);

            ServiceBed.Answer got = bed.curl(bob, list + "/" + wide.id());
            assertThat(got.status()).as(got.body()).isEqualTo(200);
            bounded(got, "GET /api/v1/allocations/{id}", List.of("owner", "jobId", "labels"), 64);
            JsonNode g = JSON.readTree(got.body());
            g.get("labels").fields().forEachRemaining(e -> assertThat(e.getValue().asText())
                    .as("a label's value cut to 256 bytes").isEqualTo(WIDE.repeat(64) + "\u2026(+192)"));
            System.out.printf("node socket, an allocation at every validation limit: %,d bytes unbounded, GET"
                    + " /api/v1/allocations/{id} %,d bytes%n", bytes(whole), bytes(got.body()));

            ServiceBed.Answer renewed = bed.curl(alice, "-X", "POST", "--data", "{\"lease\":\"3h\"}",
                    list + "/" + alices.id() + "/renew");
            assertThat(renewed.status()).as(renewed.body()).isEqualTo(200);
            bounded(renewed, "the 200 of a renew", List.of("jobId", "labels"), 64);
            assertThat(JSON.readTree(renewed.body()).get("owner").asText()).isEqualTo(alice.name());

            // an allocation nothing of which was cut says so
            ServiceBed.Answer plain = bed.curl(bob, "-X", "POST", "--data", "{\"flags\":[\"--devices=3\"]}", list);
            assertThat(plain.status()).as(plain.body()).isEqualTo(201);
            bounded(plain, "the 201 of a plain allocate", List.of(), 0);
        }
    }
}
