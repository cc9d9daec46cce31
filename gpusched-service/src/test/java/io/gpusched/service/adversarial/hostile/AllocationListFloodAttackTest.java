package io.gpusched.service.adversarial.hostile;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.gpusched.core.GpuConfig;
import io.gpusched.core.GpuRequests;
import io.gpusched.service.ServiceBed;
import io.gpusched.testing.LedgerReader;
import io.gpusched.testing.LocalUsers;
import io.gpusched.testing.LocalUsers.User;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Issue 36 on the node socket: one local user fills a DGX-1 with shared allocations (8 GPUs x 48) whose job ids and
 * labels are as long as a view keeps them (256 bytes each in UTF-8, 32 labels), and another user's {@code GET /api/v1/allocations} through the service's socket stays bounded:
 * the service's list is the console's pages (at most 500 allocations and 512 KiB a page, {@code X-Total-Count},
 * {@code Link rel="next"}, {@code ?device=}), and following the links reads every live allocation exactly once, the
 * other users' among them. Every request is curl run as a real user; what is live is read from the ledger's file by
 * {@link LedgerReader}, not from the service.
 */
@Tag("adversarial")
@Timeout(value = 4, unit = TimeUnit.MINUTES)
class AllocationListFloodAttackTest {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final Pattern NEXT = Pattern.compile("<([^>]*)>\\s*;\\s*rel=\"next\"");
    private static final String WIDE = new String(Character.toChars(0x1F600)); // 4 bytes in UTF-8
    /** The console's page bound (gpusched-server's {@code AllocationsHandler.MAX_PAGE_BYTES}), with its brackets. */
    private static final int PAGE_BYTES = 512 * 1024 + 2;

    /** An answer read with {@code curl -i}: its status, headers (lower-case names) and body. */
    record Reply(int status, Map<String, String> headers, String body) {
        int bytes() {
            return body.getBytes(StandardCharsets.UTF_8).length;
        }
    }

    private static Reply get(ServiceBed bed, User as, String... args) throws IOException {
        List<String> cmd = new ArrayList<>(List.of("curl", "-sS", "-i", "--max-time", "60", "--unix-socket",
                bed.socket.toString()));
        cmd.addAll(List.of(args));
        LocalUsers.Result r = LocalUsers.runAs(as, cmd, 90);
        if (r.exit() != 0) {
            throw new IOException("curl " + List.of(args) + " failed (" + r.exit() + "): " + r.err());
        }
        String out = r.out();
        int end = out.indexOf("\r\n\r\n");
        assertThat(end).as("an HTTP head in " + out.substring(0, Math.min(200, out.length()))).isPositive();
        String[] lines = out.substring(0, end).split("\r\n");
        Map<String, String> headers = new LinkedHashMap<>();
        for (int i = 1; i < lines.length; i++) {
            int colon = lines[i].indexOf(':');
            headers.put(lines[i].substring(0, colon).toLowerCase(Locale.ROOT), lines[i].substring(colon + 1).strip());
        }
        return new Reply(Integer.parseInt(lines[0].split(" ")[1]), headers, out.substring(end + 4));
    }

    /** @return the allocations of every page from {@code path} on, in order, following {@code Link rel="next"} */
    private static List<JsonNode> followAll(ServiceBed bed, User as, String path) throws IOException {
        List<JsonNode> read = new ArrayList<>();
        String next = path;
        for (int pages = 0; next != null; pages++) {
            assertThat(pages).as("pages from " + path).isLessThan(100);
            Reply r = get(bed, as, "http://localhost" + next);
            assertThat(r.status()).as(next + ": " + r.body()).isEqualTo(200);
            assertThat(r.bytes()).as(next + ", bytes").isLessThanOrEqualTo(PAGE_BYTES);
            JSON.readTree(r.body()).forEach(read::add);
            Matcher m = NEXT.matcher(r.headers().getOrDefault("link", ""));
            next = m.find() ? m.group(1) : null;
            if (next != null) {
                assertThat(next).as("a next page is a path of the same list, on the same socket")
                        .startsWith(path.contains("?") ? path.substring(0, path.indexOf('?')) + "?" : path + "?");
            }
        }
        return read;
    }

    @Test
    void oneUsersFloodLeavesAnotherUsersListBoundedAndEveryAllocationReadOnce(@TempDir Path tmp) throws Exception {
        assumeTrue(LocalUsers.available(), "skipped: real users need root, useradd and setpriv");
        assumeTrue(LocalUsers.run(List.of("sh", "-c", "command -v curl"), 10).exit() == 0, "skipped: needs curl");
        try (ServiceBed bed = new ServiceBed(tmp, GpuConfig.defaults())) {
            User alice = bed.accounts.user("alice");
            User bob = bed.accounts.user("bob");
            User carol = bed.accounts.user("carol");
            bed.start();
            bed.serve();
            String list = "http://localhost/api/v1/allocations";
            Reply bobs = get(bed, bob, "-X", "POST", "--data", "{\"flags\":[\"--devices=7\",\"--shared=32MiB\"]}",
                    list);
            assertThat(bobs.status()).as(bobs.body()).isEqualTo(201);
            String bobId = JSON.readTree(bobs.body()).get("id").asText();
            Reply before = get(bed, carol, list);
            assertThat(before.status()).isEqualTo(200);
            assertThat(before.headers()).containsEntry("x-total-count", "1").doesNotContainKey("link");

            // alice: a few through the socket, the rest with fields as long as a view keeps them (another process
            // of the node writes them; the service sets the owner to the caller in either case)
            for (int n = 0; n < 3; n++) {
                Reply a = get(bed, alice, "-X", "POST", "--data", "{\"flags\":[\"--devices=0\",\"--shared=32MiB\","
                        + "\"--job=flood-" + n + "\"]}", list);
                assertThat(a.status()).as(a.body()).isEqualTo(201);
            }
            for (int n = 3; n < 8 * 48 - 1; n++) {
                List<String> f = new ArrayList<>(List.of("--devices=" + (n / 48 % 8), "--shared=32MiB",
                        "--job=" + WIDE.repeat(63) + n));
                for (int l = 0; l < 32; l++) { // as many as a view keeps, each as long as a view keeps it
                    f.add("--label=" + WIDE.repeat(61) + l + "=" + WIDE.repeat(64));
                }
                bed.scheduler.allocate(GpuRequests.fromCliFlags(f).withOwner(alice.name(), alice.uid()));
            }
            List<String> live = new ArrayList<>(LedgerReader.read(bed.state).live.keySet());
            assertThat(live).hasSize(8 * 48).contains(bobId);

            Reply first = get(bed, carol, list);
            assertThat(first.status()).isEqualTo(200);
            System.out.printf(
                    "node socket, full dgx1-v100 (384 allocations, fields as long as a view keeps): first page of GET"
                            + " /api/v1/allocations %,d bytes (before the flood %,d)%n",
                    first.bytes(), before.bytes());
            assertThat(first.bytes()).as("the first page, bytes").isLessThanOrEqualTo(PAGE_BYTES);
            assertThat(first.headers()).containsEntry("x-total-count", "384").containsKey("link");

            List<JsonNode> read = followAll(bed, carol, "/api/v1/allocations");
            List<String> ids = read.stream().map(a -> a.get("id").asText()).toList();
            assertThat(ids).as("every live allocation, each once, by following Link rel=next").doesNotHaveDuplicates()
                    .containsExactlyInAnyOrderElementsOf(live);
            for (JsonNode a : read) { // what the service's view says of each: its owner and the owner's uid
                boolean isBobs = a.get("id").asText().equals(bobId);
                assertThat(a.get("owner").asText()).isEqualTo(isBobs ? bob.name() : alice.name());
                assertThat(a.get("ownerUid").asLong()).isEqualTo(isBobs ? bob.uid() : alice.uid());
            }
            assertThat(followAll(bed, carol, "/api/v1/allocations?device=7&limit=7"))
                    .as("GPU 7's holders by ?device=, 7 a page").hasSize(48)
                    .anySatisfy(a -> assertThat(a.get("id").asText()).isEqualTo(bobId));

            Reply devices = get(bed, carol, "http://localhost/api/v1/devices");
            assertThat(devices.bytes()).as("GET /api/v1/devices, bytes").isLessThan(8 * (64 * 1024 + 4096));
            for (JsonNode d : JSON.readTree(devices.body())) {
                assertThat(d.get("holdersTotal").asInt()).as("GPU %s holdersTotal", d.get("index")).isEqualTo(48);
                assertThat(d.get("holders").size()).as("GPU %s holders listed", d.get("index")).isBetween(1, 48);
            }
            Reply head = get(bed, carol, "-I", list);
            assertThat(head.status()).isEqualTo(200);
            assertThat(head.headers()).containsEntry("x-total-count", "384").containsKey("link");
        }
    }

    @Test
    void badPageParametersAreRefusedNamingTheParameter(@TempDir Path tmp) throws Exception {
        assumeTrue(LocalUsers.available(), "skipped: real users need root, useradd and setpriv");
        assumeTrue(LocalUsers.run(List.of("sh", "-c", "command -v curl"), 10).exit() == 0, "skipped: needs curl");
        try (ServiceBed bed = new ServiceBed(tmp, GpuConfig.defaults())) {
            User carol = bed.accounts.user("carol");
            bed.start();
            bed.serve();
            Map<String, String> bad = new LinkedHashMap<>();
            bad.put("limit=0", "limit=0");
            bad.put("limit=501", "limit=501");
            bad.put("limit=%D9%A3", "limit=");
            bad.put("limit=1&limit=2", "limit");
            bad.put("offset=-1", "offset=-1");
            bad.put("device=8", "device=8");
            bad.put("device=x", "device=x");
            bad.put("after=", "after=");
            bad.put("after=a-1&offset=2", "after and offset");
            for (Map.Entry<String, String> e : bad.entrySet()) {
                Reply r = get(bed, carol, "http://localhost/api/v1/allocations?" + e.getKey());
                assertThat(r.status()).as(e.getKey() + ": " + r.body()).isEqualTo(400);
                JsonNode err = JSON.readTree(r.body());
                assertThat(err.get("reason").asText()).as(e.getKey()).isEqualTo("INVALID_REQUEST");
                assertThat(err.get("error").asText()).as(e.getKey()).contains(e.getValue());
            }
            Reply ok = get(bed, carol, "http://localhost/api/v1/allocations?limit=500&device=0&after=a-1");
            assertThat(ok.status()).as(ok.body()).isEqualTo(200);
            assertThat(ok.body()).isEqualTo("[]");
        }
    }
}
