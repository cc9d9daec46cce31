package io.gpusched.isolation;

import io.gpusched.core.Allocation;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.locks.ReentrantLock;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/** State and locking shared by both mechanisms. */
abstract class AbstractFence implements Fence {
    static final Logger LOG = LoggerFactory.getLogger(Fence.class);

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

    /** Fences the cgroup; sets {@link #active} on success, leaves the cgroup as it was on failure. */
    abstract void apply();

    /** Moves the fence to another plan; on failure the previous rules stay in force. */
    abstract void replace(NodePlan next, List<DeviceRule> nextRules);

    /** Gives the cgroup back to the host's policy; on failure the fence stays in force. */
    abstract void remove();

    /** Releases what the fence holds once it is revoked or its cgroup is gone (nothing to write there any more). */
    void dropped() {
    }

    /** Removes node-wide files of a cgroup that is gone: no process can fence its identity again. */
    void gone() {
    }

    /** @return the identity of the fenced cgroup */
    abstract CgroupDir.Id id();

    abstract List<DeviceRule> rulesFor(NodePlan p);

    ReentrantLock lock() {
        return owner.lockFor(cgroup);
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

    /** Marks the fence dead because its cgroup is gone; the caller holds the lock. */
    void forgetGone(String why) {
        LOG.info("fence on {} dropped: {}", cgroup, why);
        active = false;
        dropped();
        gone();
        owner.active.remove(cgroup, this);
    }

    @Override
    public void update(Allocation next) {
        ReentrantLock l = lock();
        l.lock();
        try (CgroupLock node = CgroupLock.acquire(owner.stateDir, id(), cgroup)) {
            if (!active) {
                throw new IsolationException("the fence on " + cgroup + " was revoked; fence the cgroup again");
            }
            NodePlan p = owner.plan(next);
            try {
                replace(p, null);
            } catch (CgroupDir.GoneException e) {
                forgetGone(e.getMessage());
                throw new IsolationException(e.getMessage() + "; this fence is void: fence the cgroup now at " + cgroup
                        + " with DeviceIsolator.fence", e);
            }
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
            try (CgroupLock node = CgroupLock.acquire(owner.stateDir, id(), cgroup)) {
                remove();
            } catch (CgroupDir.GoneException e) {
                forgetGone(e.getMessage());
                return;
            }
            active = false;
            dropped();
            owner.active.remove(cgroup, this);
        } finally {
            l.unlock();
        }
    }

    @Override
    public String toString() {
        return "Fence[" + cgroup + " " + mechanism() + " " + allocation.id() + (active ? "" : " revoked") + "]";
    }
}
