package io.gpusched.client;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.fasterxml.jackson.databind.ObjectMapper;
import io.gpusched.core.Allocation;
import io.gpusched.core.AllocationView;
import io.gpusched.core.DeviceView;
import io.gpusched.core.GpuInventories;
import io.gpusched.core.GpuRequests;
import io.gpusched.core.GpuScheduler;
import io.gpusched.testing.UnixHttpStandIn;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@link ServiceClient} reads the service's paged lists whole (docs/SERVICE.md): {@code allocations()} follows each
 * page's {@code Link rel="next"} on the same socket and the same list only, at most {@code maxPages} pages, and
 * {@code devices()} completes a holder list the service cut ({@code holdersTotal}) from
 * {@code GET /api/v1/allocations?device=<index>}. The stand-in pages a real simulated scheduler's allocations, written
 * by gpu-core's views.
 */
@Timeout(60)
class ServiceClientPagesTest {
    private static final ObjectMapper M = new ObjectMapper();
    private static final int PAGE = 3;

    @TempDir
    Path dir;
    GpuScheduler scheduler;
    UnixHttpStandIn service;
    ServiceClient client;

    @BeforeEach
    void setUp() {
        scheduler = GpuScheduler.builder().inventory(GpuInventories.simulated("dgx1-v100")).auditLogging(false)
                .build();
    }

    @AfterEach
    void tearDown() throws Exception {
        if (client != null) {
            client.close();
        }
        if (service != null) {
            service.close();
        }
        scheduler.close();
    }

    private void serve(UnixHttpStandIn.Handler h, int maxPages) throws Exception {
        service = new UnixHttpStandIn(dir.resolve("gpusched.sock"), h);
        client = ServiceClient.builder().socket(service.socket()).answerTimeout(Duration.ofSeconds(10))
                .maxPages(maxPages).build();
    }

    private static void answer(UnixHttpStandIn.Reply x, Object body, String link) throws Exception {
        byte[] b = M.writeValueAsBytes(body);
        x.raw("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n" + (link == null ? "" : "Link: " + link + "\r\n")
                + "Content-Length: " + b.length + "\r\nConnection: close\r\n\r\n");
        x.raw(b);
    }

    private List<Allocation> shared(int count, int device) {
        List<Allocation> out = new ArrayList<>();
        for (int i = 0; i < count; i++) {
            out.add(scheduler.allocate(GpuRequests.fromCliFlags(List.of("--devices=" + device, "--shared=32MiB",
                    "--owner=u" + device + "-" + i))));
        }
        return out;
    }

    /** Answers {@code /api/v1/allocations[?device=D][&page=K]} in pages of {@value #PAGE}, linking the next. */
    private void pageOf(UnixHttpStandIn.Request r, UnixHttpStandIn.Reply x) throws Exception {
        String t = r.target();
        String query = t.contains("?") ? t.substring(t.indexOf('?') + 1) : "";
        Integer device = null;
        int page = 0;
        for (String kv : query.isEmpty() ? new String[0] : query.split("&")) {
            String[] p = kv.split("=");
            if (p[0].equals("device")) {
                device = Integer.valueOf(p[1]);
            } else {
                page = Integer.parseInt(p[1]);
            }
        }
        List<Map<String, Object>> all = new ArrayList<>();
        for (Allocation a : scheduler.allocations()) {
            if (device == null || a.deviceIndices().contains(device)) {
                all.add(AllocationView.of(a, Instant.now()).toMap());
            }
        }
        int from = Math.min(all.size(), page * PAGE);
        int to = Math.min(all.size(), from + PAGE);
        String link = to < all.size() ? "</api/v1/allocations?" + (device == null ? "" : "device=" + device + "&")
                + "page=" + (page + 1) + ">; rel=\"next\"" : null;
        answer(x, all.subList(from, to), link);
    }

    @Test
    void allocationsFollowsEveryNextPageAndListsEachOnce() throws Exception {
        List<Allocation> all = new ArrayList<>(shared(5, 0));
        all.addAll(shared(5, 3));
        serve(this::pageOf, 100);
        List<AllocationView> read = client.allocations();
        assertThat(read).extracting(AllocationView::id).containsExactlyElementsOf(all.stream().map(Allocation::id)
                .toList());
        assertThat(service.requests()).extracting(UnixHttpStandIn.Request::target).containsExactly(
                "/api/v1/allocations", "/api/v1/allocations?page=1", "/api/v1/allocations?page=2",
                "/api/v1/allocations?page=3");
        assertThat(service.requests()).allSatisfy(r -> assertThat(r.method()).isEqualTo("GET"));
    }

    @Test
    void aPageThatRepeatsAnAllocationListsItOnce() throws Exception {
        List<Allocation> all = shared(4, 1);
        List<Map<String, Object>> views = all.stream().map(a -> AllocationView.of(a, Instant.now()).toMap()).toList();
        serve((r, x) -> {
            if (r.target().endsWith("?page=1")) {
                answer(x, views.subList(1, 4), null); // the second page begins with the first's last
            } else {
                answer(x, views.subList(0, 2), "</api/v1/allocations?page=1>; rel=\"next\"");
            }
        }, 100);
        assertThat(client.allocations()).extracting(AllocationView::id)
                .containsExactlyElementsOf(all.stream().map(Allocation::id).toList());
    }

    @Test
    void devicesCompleteAHolderListTheServiceCut() throws Exception {
        shared(7, 2);
        shared(2, 5);
        Instant now = Instant.now();
        List<DeviceView> whole = DeviceView.of(scheduler.devices(), scheduler.allocations(), now);
        List<Map<String, Object>> cut = new ArrayList<>();
        for (DeviceView d : whole) {
            Map<String, Object> m = d.toMap();
            if (d.index() == 2) { // as the service bounds it: the first holders, and how many there are
                m.put("holders", d.holders().subList(0, 2).stream().map(AllocationView::toMap).toList());
            }
            m.put("holdersTotal", d.holders().size());
            cut.add(m);
        }
        serve((r, x) -> {
            if (r.target().equals("/api/v1/devices")) {
                answer(x, cut, null);
            } else {
                pageOf(r, x);
            }
        }, 100);
        List<DeviceView> read = client.devices();
        assertThat(read.get(2).holders()).as("GPU 2's 7 holders, 2 of them listed").extracting(AllocationView::id)
                .containsExactlyElementsOf(whole.get(2).holders().stream().map(AllocationView::id).toList());
        assertThat(read.get(2).sharedHolders()).isEqualTo(7);
        assertThat(read.get(5).holders()).extracting(AllocationView::id)
                .containsExactlyElementsOf(whole.get(5).holders().stream().map(AllocationView::id).toList());
        assertThat(service.requests()).extracting(UnixHttpStandIn.Request::target).as("only the cut list is read")
                .containsExactly("/api/v1/devices", "/api/v1/allocations?device=2",
                        "/api/v1/allocations?device=2&page=1", "/api/v1/allocations?device=2&page=2");
    }

    @Test
    void aNextPageElsewhereIsRefusedAndNotRequested() throws Exception {
        shared(2, 0);
        List<String> elsewhere = List.of("http://evil.example/api/v1/allocations?page=1",
                "//evil.example/api/v1/allocations?page=1", "/api/v1/jobs?page=1", "/api/v1/allocations",
                "/api/v1/allocationsX?page=1", "/api/v1/allocations?page=1 HTTP/1.1", "/api/v1/allocations?p#x",
                "/api/v1/allocations?" + "x".repeat(ServiceClient.MAX_LINK_CHARS));
        for (String link : elsewhere) {
            List<Map<String, Object>> one = List.of(AllocationView.of(scheduler.allocations().get(0), Instant.now())
                    .toMap());
            serve((r, x) -> answer(x, one, "<" + link + ">; rel=\"next\""), 100);
            assertThatThrownBy(() -> client.allocations()).as(link).isInstanceOfSatisfying(
                    NodeServiceException.class, e -> {
                        assertThat(e.kind()).isEqualTo(NodeServiceException.Kind.BAD_ANSWER);
                        assertThat(e.getMessage()).contains("rel=\"next\"").contains("/api/v1/allocations");
                    });
            assertThat(service.requests()).as(link).hasSize(1);
            tearDownClient();
        }
    }

    @Test
    void malformedOrOtherLinksAreBadAnswersOrTheEnd() throws Exception {
        shared(1, 0);
        List<Map<String, Object>> one = List.of(AllocationView.of(scheduler.allocations().get(0), Instant.now())
                .toMap());
        for (String bad : List.of("/api/v1/allocations?page=1; rel=next", "<a>; rel=next, junk",
                "</api/v1/allocations?a=1>; rel=next, </api/v1/allocations?a=2>; rel=\"next\"")) {
            serve((r, x) -> answer(x, one, bad), 100);
            assertThatThrownBy(() -> client.allocations()).as(bad).isInstanceOfSatisfying(NodeServiceException.class,
                    e -> assertThat(e.kind()).isEqualTo(NodeServiceException.Kind.BAD_ANSWER));
            tearDownClient();
        }
        serve((r, x) -> answer(x, one, "</api/v1/allocations?page=0>; rel=\"prev\", </x>; rel=nextish"), 100);
        assertThat(client.allocations()).hasSize(1);
        assertThat(service.requests()).hasSize(1);
    }

    @Test
    void endlessPagesStopAtTheClientsLimitWithATypedError() throws Exception {
        shared(1, 0);
        List<Map<String, Object>> one = List.of(AllocationView.of(scheduler.allocations().get(0), Instant.now())
                .toMap());
        serve((r, x) -> answer(x, one, "</api/v1/allocations?after=" + service.requests().size()
                + ">; rel=\"next\""), 5);
        assertThatThrownBy(() -> client.allocations()).isInstanceOfSatisfying(NodeServiceException.class, e -> {
            assertThat(e.kind()).isEqualTo(NodeServiceException.Kind.ANSWER_TOO_LARGE);
            assertThat(e.reason()).isEqualTo("TOO_MANY_PAGES");
            assertThat(e.getMessage()).contains("more than 5 pages").contains("maxPages");
        });
        assertThat(service.requests()).hasSize(5);
        tearDownClient();

        serve((r, x) -> answer(x, one, "</api/v1/allocations?after=a>; rel=\"next\""), 100);
        assertThatThrownBy(() -> client.allocations()).as("a link back to a page already read")
                .isInstanceOfSatisfying(NodeServiceException.class, e -> {
                    assertThat(e.kind()).isEqualTo(NodeServiceException.Kind.BAD_ANSWER);
                    assertThat(e.getMessage()).contains("already read");
                });
        assertThat(service.requests()).hasSize(2);
        assertThatThrownBy(() -> ServiceClient.builder().maxPages(0)).isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("maxPages");
    }

    private void tearDownClient() throws Exception {
        client.close();
        service.close();
        client = null;
        service = null;
    }
}
