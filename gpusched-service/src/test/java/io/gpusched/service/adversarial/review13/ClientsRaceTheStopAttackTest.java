package io.gpusched.service.adversarial.review13;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.gpusched.core.Allocation;
import io.gpusched.core.GpuConfig;
import io.gpusched.core.UserQuotas;
import io.gpusched.service.NodeService;
import io.gpusched.service.ServiceBed;
import io.gpusched.testing.LocalUsers;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Several real users race allocate (with and without a wait), renew and release over the socket (curl, as each user)
 * against NodeService.stop(). What each client was told is counted here, by the test's own code, and held against the
 * ledger and audit.log (docs/SERVICE.md, Restarts and Audit): every allocation acknowledged (201 with an id) and not
 * released (200) is on the ledger, and nothing else of theirs is; every acknowledged change has its "ok" line and every
 * 503 SHUTTING_DOWN its refusal line; a request begun after stop() returned changes nothing (503).
 */
@Tag("adversarial")
@Timeout(value = 3, unit = TimeUnit.MINUTES)
class ClientsRaceTheStopAttackTest {
    private static final ObjectMapper JSON = new ObjectMapper();

    record Told(String user, String what, String id, int status, String reason, long startNanos) {
    }

    @Test
    void whatEachClientWasToldMatchesTheLedgerAndTheAudit(@TempDir Path tmp) throws Exception {
        try (ServiceBed bed = new ServiceBed(tmp, GpuConfig.builder().users(UserQuotas.none()).build())) {
            org.junit.jupiter.api.Assumptions.assumeTrue(LocalUsers.available(), "needs root and useradd");
            NodeService s = bed.start();
            bed.serve();
            List<LocalUsers.User> users = new ArrayList<>();
            for (int i = 0; i < 3; i++) {
                users.add(bed.accounts.user("r13u" + i));
            }
            List<Told> told = new CopyOnWriteArrayList<>();
            List<String> broken = new CopyOnWriteArrayList<>();
            AtomicBoolean halt = new AtomicBoolean();
            AtomicLong stopReturned = new AtomicLong(Long.MAX_VALUE);
            Map<String, Set<String>> mine = new ConcurrentHashMap<>();
            List<Thread> clients = new ArrayList<>();
            for (LocalUsers.User u : users) {
                mine.put(u.name(), ConcurrentHashMap.newKeySet());
                for (int k = 0; k < 2; k++) {
                    Thread t = new Thread(() -> {
                        ThreadLocalRandom r = ThreadLocalRandom.current();
                        while (!halt.get()) {
                            try {
                                Set<String> held = mine.get(u.name());
                                List<String> ids = new ArrayList<>(held);
                                int pick = r.nextInt(10);
                                long t0 = System.nanoTime();
                                if (ids.isEmpty() || pick < 4) {
                                    String body = pick % 2 == 0 ? "{\"flags\":[\"--gpu=1\"]}"
                                            : "{\"flags\":[\"--gpu=1\"],\"wait\":\"3s\"}";
                                    ServiceBed.Answer a = bed.curl(u, "-X", "POST", "-H",
                                            "Content-Type: application/json", "--data-binary", body,
                                            "http://localhost/api/v1/allocations");
                                    String id = a.status() == 201 ? JSON.readTree(a.body()).path("id").asText()
                                            : null;
                                    if (id != null) {
                                        held.add(id);
                                    }
                                    told.add(new Told(u.name(), "allocate", id, a.status(), reason(a), t0));
                                } else {
                                    String id = ids.get(r.nextInt(ids.size()));
                                    if (pick < 7) {
                                        ServiceBed.Answer a = bed.curl(u, "-X", "POST", "-H",
                                                "Content-Type: application/json", "--data-binary",
                                                "{\"lease\":\"2h\"}", "http://localhost/api/v1/allocations/" + id
                                                        + "/renew");
                                        told.add(new Told(u.name(), "renew", id, a.status(), reason(a), t0));
                                    } else {
                                        ServiceBed.Answer a = bed.curl(u, "-X", "DELETE",
                                                "http://localhost/api/v1/allocations/" + id);
                                        if (a.status() == 200) {
                                            held.remove(id);
                                        }
                                        told.add(new Told(u.name(), "release", id, a.status(), reason(a), t0));
                                    }
                                }
                            } catch (Exception e) {
                                broken.add(u.name() + ": " + e);
                            }
                        }
                    }, "review13-client-" + u.name() + "-" + k);
                    t.start();
                    clients.add(t);
                }
            }
            long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
            while (told.stream().filter(x -> x.status() / 100 == 2).count() < 30 && System.nanoTime() < until) {
                Thread.sleep(20);
            }
            s.stop();
            stopReturned.set(System.nanoTime());
            Thread.sleep(2000); // clients go on for a while after the stop returned
            halt.set(true);
            for (Thread t : clients) {
                t.join(90_000);
            }
            List<String> problems = new ArrayList<>(broken);
            // what the clients were told, against the ledger
            Set<String> acknowledged = new HashSet<>();
            Set<String> released = new HashSet<>();
            for (Told x : told) {
                if (x.what().equals("allocate") && x.status() == 201) {
                    acknowledged.add(x.id());
                }
                if (x.what().equals("release") && x.status() == 200) {
                    released.add(x.id());
                }
                if (x.startNanos() > stopReturned.get() && x.status() / 100 == 2) {
                    problems.add("begun after stop() returned, yet " + x);
                }
                if (x.status() == 503 && !"SHUTTING_DOWN".equals(x.reason())) {
                    problems.add("a 503 that is not SHUTTING_DOWN: " + x);
                }
            }
            Set<String> live = new HashSet<>();
            for (Allocation a : bed.scheduler.allocations()) {
                live.add(a.id());
            }
            for (String id : acknowledged) {
                if (released.contains(id) && live.contains(id)) {
                    problems.add(id + ": its release was acknowledged (200) but it is on the ledger");
                }
                if (!released.contains(id) && !live.contains(id)) {
                    problems.add(id + ": acknowledged (201), never released by its owner, not on the ledger");
                }
            }
            for (String id : live) {
                if (!acknowledged.contains(id)) {
                    problems.add(id + ": on the ledger but never acknowledged to any client");
                }
            }
            s.close();
            // audit.log against what they were told
            List<JsonNode> audit = new ArrayList<>();
            for (String l : Files.readAllLines(bed.state.resolve("audit.log"))) {
                audit.add(JSON.readTree(l));
            }
            for (Told x : told) {
                if (x.status() / 100 == 2 && !x.what().equals("allocate")) {
                    if (audit.stream().noneMatch(n -> n.path("action").asText().equals(x.what()) && n.path("subject")
                            .asText().equals(x.id()) && n.path("result").asText().equals("ok"))) {
                        problems.add("acknowledged, not audited ok: " + x);
                    }
                }
            }
            for (String id : acknowledged) {
                if (audit.stream().noneMatch(n -> n.path("action").asText().equals("allocate") && n.path("subject")
                        .asText().equals(id) && n.path("result").asText().equals("ok"))) {
                    problems.add("allocation " + id + " acknowledged, no 'allocate ok' line");
                }
            }
            long shuttingTold = told.stream().filter(x -> "SHUTTING_DOWN".equals(x.reason())).count();
            long shuttingAudited = audit.stream().filter(n -> n.path("result").asText().equals("SHUTTING_DOWN"))
                    .count();
            if (shuttingAudited < shuttingTold) {
                problems.add(shuttingTold + " clients told SHUTTING_DOWN, " + shuttingAudited + " such lines audited");
            }
            long ok = told.stream().filter(x -> x.status() / 100 == 2).count();
            System.out.printf("review13 race: %d answers, %d 2xx, %d SHUTTING_DOWN, %d other, %d live at the end%n",
                    told.size(), ok, shuttingTold, told.size() - ok - shuttingTold, live.size());
            assertThat(ok).as("changes acknowledged").isPositive();
            assertThat(shuttingTold).as("clients told SHUTTING_DOWN").isPositive();
            assertThat(problems).as("of %d answers (%d 2xx, %d SHUTTING_DOWN)", told.size(), ok, shuttingTold)
                    .isEmpty();
        }
    }

    private static String reason(ServiceBed.Answer a) {
        try {
            return a.status() / 100 == 2 ? null : JSON.readTree(a.body()).path("reason").asText(null);
        } catch (Exception e) {
            return "<unparsable " + a.body() + ">";
        }
    }
}
