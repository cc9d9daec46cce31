package io.gpusched.isolation;

import io.gpusched.core.Allocation;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.locks.ReentrantLock;

/** State and locking shared by both mechanisms. */
abstract class AbstractFence implements Fence {
    final CgroupDeviceIsolator owner;
    final Path cgroup;
    volatile Allocation allocation;
    volatile NodePlan plan;
    volatile List<DeviceRule> rules;
    volatile boolean active;

    AbstractFence(CgroupDeviceIsolator owner, Path cgroup, Allocation allocation, NodePlan plan) {
        this.owner = owner;
        this.cgroup = cgroup;
        this.allocation = allocation;
        this.plan = plan;
    }

    abstract void apply();

    abstract void replace(NodePlan next, List<DeviceRule> nextRules);

    abstract void remove();

    ReentrantLock lock() {
        return owner.locks.computeIfAbsent(cgroup, k -> new ReentrantLock());
    }

    @Override
    public Path cgroup() {
        return cgroup;
    }

    @Override
    public Allocation allocation() {
        return allocation;
    }

    @Override
    public List<DeviceRule> rules() {
        return rules;
    }

    @Override
    public List<String> notes() {
        return plan.notes();
    }

    @Override
    public boolean isActive() {
        return active;
    }

    @Override
    public void update(Allocation next) {
        ReentrantLock l = lock();
        l.lock();
        try {
            if (!active) {
                throw new IsolationException("the fence on " + cgroup + " was revoked; fence the cgroup again");
            }
            NodePlan p = owner.plan(next);
            replace(p, rulesFor(p));
            allocation = next;
            plan = p;
        } finally {
            l.unlock();
        }
    }

    @Override
    public void revoke() {
        ReentrantLock l = lock();
        l.lock();
        try {
            if (!active) {
                return;
            }
            remove();
            active = false;
            owner.active.remove(cgroup, this);
        } finally {
            l.unlock();
        }
    }

    abstract List<DeviceRule> rulesFor(NodePlan p);

    @Override
    public String toString() {
        return "Fence[" + cgroup + " " + mechanism() + " " + allocation.id() + (active ? "" : " revoked") + "]";
    }
}
