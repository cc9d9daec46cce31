package io.gpusched.client.adversarial.watch;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.gpusched.client.NodeServiceException;
import io.gpusched.client.NodeServiceException.Kind;
import io.gpusched.client.ServiceClient;
import io.gpusched.testing.UnixHttpStandIn;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * A hostile node service against {@code ServiceClient.watch}: a {@code state} event whose {@code truncated.rest} names
 * the list's pages, which never end. {@code WatchState} promises to keep at most the client's answer limit of
 * allocations ({@code maxAnswerBytes}); the pages the state's marker names are read whole first (up to
 * {@code maxPages}, each up to {@code maxAnswerBytes}) and only then counted, so the watch keeps (and reads) up to
 * {@code maxPages} times its limit: with the defaults (1,000 pages of 16 MiB) a hostile socket can make a watch hold
 * gigabytes before it ends.
 */
@Tag("adversarial")
@Timeout(180)
class WatchRestPagesAttackTest {
    private static final int LIMIT = 64 * 1024;

    @TempDir
    Path dir;
    UnixHttpStandIn service;

    @AfterEach
    void tearDown() throws Exception {
        if (service != null) {
            service.close();
        }
    }

    private static String device(int index) {
        return "{\"index\":" + index + ",\"uuid\":\"GPU-" + index + "\",\"name\":\"sim\",\"vendor\":\"NVIDIA\","
                + "\"health\":\"HEALTHY\",\"pool\":\"IN_POOL\"}";
    }

    private static String allocation(String id, int device, String padding) {
        return "{\"id\":\"" + id + "\",\"owner\":\"mallory\",\"devices\":[" + device + "],\"uuids\":[\"GPU-" + device
                + "\"],\"sharing\":\"SHARED\",\"createdAt\":\"2026-11-29T10:00:00Z\",\"labels\":{\"pad\":\""
                + padding + "\"}}";
    }

    @Test
    void restPagesThatNeverEndAreCutAtTheWatchsLimitNotReadUpToMaxPages() throws Exception {
        String pad = "x".repeat(1000);
        AtomicInteger pages = new AtomicInteger();
        AtomicLong served = new AtomicLong();
        String state =
                "{\"devices\":[" + device(0) + "," + device(1) + "],\"allocations\":[],\"truncated\":{\"reason\":"
                        + "\"STATE_EVENT_BOUND\",\"rest\":\"/api/v1/allocations?after=p0&limit=500\"}}";
        service = new UnixHttpStandIn(dir.resolve("s.sock"), (r, x) -> {
            if (r.target().startsWith("/api/v1/allocations?after=p")) {
                int n = pages.incrementAndGet();
                // each page ~50 KB (within the 64 KiB answer limit), 48 allocations never seen before
                StringBuilder b = new StringBuilder("[");
                for (int i = 0; i < 48; i++) {
                    b.append(i == 0 ? "" : ",").append(allocation("p" + n + "-" + i, i % 2, pad));
                }
                byte[] body = b.append(']').toString().getBytes(StandardCharsets.UTF_8);
                served.addAndGet(body.length);
                x.raw("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nLink: </api/v1/allocations?after=p"
                        + n + "&limit=500>; rel=\"next\"\r\nContent-Length: " + body.length
                        + "\r\nConnection: close\r\n\r\n");
                x.raw(body);
                x.close();
                return;
            }
            x.raw("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n");
            x.raw("event: state\ndata: " + state + "\n\n");
            Thread.sleep(120_000);
        });
        ServiceClient c = ServiceClient.builder().socket(service.socket()).answerTimeout(Duration.ofSeconds(10))
                .connectTimeout(Duration.ofSeconds(2)).maxAnswerBytes(LIMIT).maxLineBytes(4096).build();
        assertThatThrownBy(() -> c.watch(Duration.ofSeconds(1), f -> true))
                .isInstanceOfSatisfying(NodeServiceException.class, e -> assertThat(e.kind()).as(e.getMessage())
                        .isEqualTo(Kind.ANSWER_TOO_LARGE));
        // two pages already exceed the 64 KiB the watch may keep: reading (and holding) more is the unbounded part
        assertThat(pages.get()).as("pages of allocations the watch read (%d bytes) to keep at most %d bytes",
                served.get(), LIMIT).isLessThanOrEqualTo(3);
    }
}
