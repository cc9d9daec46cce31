package io.gpusched.server;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.gpusched.accounting.AccountingRecord.Interval;
import io.gpusched.accounting.RecordCodec;
import io.micrometer.prometheusmetrics.PrometheusConfig;
import io.micrometer.prometheusmetrics.PrometheusMeterRegistry;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.zip.CRC32C;
import org.junit.jupiter.api.Test;

/**
 * Review 53: docs/ACCOUNTING.md and {@link UsageMeters}'s Javadoc: "the first 100 owners the process sees get a series
 * of their own, later ones count under {@code owner="_other"} ... Allocations without an owner count under
 * {@code owner=""} (the series without an owner ...)". {@code UsageMeters.onInterval} gives the no-owner label a slot
 * only while fewer than 100 slots are taken: once a busy node's console has seen 100 owners, every allocation without
 * an owner is counted under {@code _other}, mixed with the overflow owners, and {@code owner=""} never appears.
 */
class Review53UnownedAfterTheOwnerBoundTest {
    private static final ObjectMapper JSON = new ObjectMapper();

    @Test
    void allocationsWithoutAnOwnerCountUnderTheEmptyOwnerAfterAHundredOwners() {
        PrometheusMeterRegistry r = new PrometheusMeterRegistry(PrometheusConfig.DEFAULT);
        UsageMeters m = new UsageMeters(r);
        for (int i = 0; i < UsageMeters.MAX_OWNERS; i++) {
            m.onInterval(interval("owner-" + i));
        }
        m.onInterval(interval(null)); // one GPU-second of an allocation without an owner
        m.onInterval(interval(null));
        List<String> series = r.scrape().lines().filter(l -> l.startsWith("gpusched_usage_gpu_seconds_total{"))
                .toList();
        assertThat(series)
                .as("after 100 owners, two 1-s intervals of allocations without an owner: expected them under"
                        + " owner=\"\" (2.0), as docs/ACCOUNTING.md says, not folded into owner=\"_other\"")
                .contains("gpusched_usage_gpu_seconds_total{owner=\"\"} 2.0")
                .noneMatch(l -> l.startsWith("gpusched_usage_gpu_seconds_total{owner=\"_other\"}"));
    }

    /** An interval of one GPU held 1 s, as the store would read it (null owner: none). */
    private static Interval interval(String owner) {
        String json = "{\"k\":\"i\",\"id\":\"x\"," + (owner == null ? "" : "\"owner\":" + quote(owner) + ",")
                + "\"from\":0,\"to\":1000,"
                + "\"gpus\":[{\"i\":0,\"uuid\":\"GPU-0\",\"held\":1000,\"meas\":0,\"um\":0,\"us\":0,\"idle\":0,"
                + "\"e\":0,\"ee\":0,\"em\":0}]}";
        CRC32C c = new CRC32C();
        byte[] b = json.getBytes(StandardCharsets.UTF_8);
        c.update(b, 0, b.length);
        return (Interval) RecordCodec.decode(String.format("%08x", c.getValue()) + " " + json);
    }

    private static String quote(String s) {
        try {
            return JSON.writeValueAsString(s);
        } catch (JsonProcessingException e) {
            throw new IllegalStateException(e);
        }
    }
}
