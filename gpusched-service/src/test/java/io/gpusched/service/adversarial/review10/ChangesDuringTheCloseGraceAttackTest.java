package io.gpusched.service.adversarial.review10;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import io.gpusched.service.NodeService;
import io.gpusched.service.ServiceBed;
import io.gpusched.testing.LocalUsers;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * The console's close now keeps serving for up to 5 s ({@code ConsoleServer.CLOSE_GRACE}) while a request is in
 * progress, after the service was closed (as {@code gpusched serve} stops on SIGTERM). A client that does not read
 * keeps a request in progress for all of it (its exit line waits for it). Meanwhile the socket still takes new
 * connections and the service's routes still act on the ledger: docs/SERVICE.md says "nothing is granted or released
 * after that", and the audit has "one JSON line per change and per refusal", but the service's audit is closed by
 * then. alice renews and releases her allocation during the grace: both are made, on the ledger, and neither is in
 * audit.log. (Fixed: both are refused; then the refusals were only in the service's log, as the audit closed with the
 * service, until the service's stop was split from its close: serve stops it, closes the console, then closes it.)
 */
@Tag("adversarial")
@Timeout(value = 3, unit = TimeUnit.MINUTES)
class ChangesDuringTheCloseGraceAttackTest {

    @Test
    void nothingIsReleasedOrRenewedUnauditedAfterTheStop(@TempDir Path tmp) throws Exception {
        try (ServiceBed bed = new ServiceBed(tmp, Clients.config(Duration.ofMillis(300))).jobs()) {
            NodeService s = bed.start();
            bed.serve();
            LocalUsers.User alice = bed.accounts.user("alice");
            ServiceBed.Answer made = bed.curl(alice, "-X", "POST", "-H", "Content-Type: application/json",
                    "--data-binary", "{\"flags\":[\"--gpu=1\"]}", "http://localhost/api/v1/allocations");
            assertThat(made.status()).as("alice's allocation: %s", made.body()).isEqualTo(201);
            String id = Clients.JSON.readTree(made.body()).path("id").asText();
            Process client = Clients.attached(bed, alice, Clients.jobBody(Clients.homeOf(tmp, alice), List.of(
                    "/usr/bin/yes", "gpusched")));
            Thread closer = null;
            try {
                Clients.awaitRunning(s, 60);
                Clients.awaitBlocked(bed.jobParent, "yes", 60);
                s.stop(); // as serve stops: the service stops, the console closes, then the service closes
                closer = new Thread(bed.console::close, "review10-console-close");
                closer.start();
                Thread.sleep(200);
                ServiceBed.Answer renew = bed.curl(alice, "-X", "POST", "-H", "Content-Type: application/json",
                        "--data-binary", "{\"lease\":\"2h\"}", "http://localhost/api/v1/allocations/" + id + "/renew");
                ServiceBed.Answer release = bed.curl(alice, "-X", "DELETE", "http://localhost/api/v1/allocations/"
                        + id);
                boolean stillHeld = bed.scheduler.allocation(id).isPresent();
                List<String> audited = auditLinesOf(bed.state.resolve("audit.log"), id);
                assertThat(release.status()).as("alice's release of %s after the service stopped (answer %s; renew"
                        + " answered %d %s; allocation still held: %s; audit.log lines naming it: %s)", id,
                        release.body(), renew.status(), renew.body(), stillHeld, audited).isEqualTo(503);
                assertThat(stillHeld).as("%s is still held: nothing is released after the stop", id).isTrue();
                assertThat(renew.status()).as("alice's renew after the stop (%s)", renew.body()).isEqualTo(503);
                assertThat(audited).as("audit.log lines naming %s", id).contains("renew=SHUTTING_DOWN",
                        "release=SHUTTING_DOWN");
            } finally {
                Clients.cleanUp(bed, alice, client);
                if (closer != null) {
                    closer.join(TimeUnit.SECONDS.toMillis(60));
                    bed.console = null; // closed above
                    s.close();
                    bed.service = null;
                }
            }
        }
    }

    private static List<String> auditLinesOf(Path log, String id) throws Exception {
        if (!Files.exists(log)) {
            return List.of("<no audit.log>");
        }
        return Files.readAllLines(log).stream().filter(l -> {
            try {
                JsonNode n = Clients.JSON.readTree(l);
                return id.equals(n.path("subject").asText());
            } catch (Exception e) {
                return false;
            }
        }).map(l -> {
            try {
                JsonNode n = Clients.JSON.readTree(l);
                return n.path("action").asText() + "=" + n.path("result").asText();
            } catch (Exception e) {
                return l;
            }
        }).toList();
    }
}
