package store

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// nodeIdentityRun writes a two-node run as the collector writes it for real miles: the NVML receivers name each
// node by its host name and list its addresses (host.ip) in the lane catalog's nodes table; miles' topology names
// the engines' nodes by IP (get_current_node_ip), with the GPU UUIDs on host-a and without them on host-b; the
// exporter folded those topology lanes into the catalog under their IP keys; a trainer on host-a names its node
// by host name, one on host-b by IP. Each node's layout is a shard of its own (two gateways).
func nodeIdentityRun(t *testing.T) string {
	dir := t.TempDir()
	hour := time.Unix(int64(h0), 0).UTC().Format("20060102_15")
	write(t, dir, "dashboard/meta.json", `{"schema_version":3,"writer":"otelcol-miles","run_name":"r","start_ts":`+fmt.Sprint(h0)+`}`)
	for _, sh := range []struct{ id, host, ip, topoUUID string }{
		{"a", "host-a", "10.0.0.2", "GPU-a%d"},
		{"b", "host-b", "10.0.0.3", ""},
	} {
		root := "dashboard/shards/" + sh.id + "/"
		write(t, dir, root+"meta.json", `{"schema_version":3,"writer":"otelcol-miles","run_name":"r","shard":"`+sh.id+`","start_ts":`+fmt.Sprint(h0)+`}`)
		var lanes, util []string
		for g := range 2 {
			uuid := fmt.Sprintf("GPU-%s%d", sh.id, g)
			lanes = append(lanes,
				fmt.Sprintf(`"%s:%d":{"uuid":%q,"model":"NVIDIA H100","ranks":[%d],"engine_addrs":[],"roles":["train"]}`, sh.host, g, uuid, g),
				fmt.Sprintf(`"%s:%d":{"uuid":%q,"ranks":[],"engine_addrs":["http://%s:30000"],"roles":["rollout"]}`, sh.ip, g, map[bool]string{true: uuid}[sh.topoUUID != ""], sh.ip))
			util = append(util, gpuLine(h0+10, sh.host, g, 50))
		}
		write(t, dir, root+"lane_catalog.json", `{"version":2,"lanes":{`+strings.Join(lanes, ",")+`},"nodes":{"`+sh.host+`":{"ips":["`+sh.ip+`","fe80::1%eth0"]}}}`)
		write(t, dir, root+"gpu_util/"+hour+".jsonl", strings.Join(util, ""))
		uuids := `["",""]`
		if sh.topoUUID != "" {
			uuids = fmt.Sprintf(`[%q,%q]`, fmt.Sprintf(sh.topoUUID, 0), fmt.Sprintf(sh.topoUUID, 1))
		}
		write(t, dir, root+"topology/"+hour+".jsonl", fmt.Sprintf(`{"ts":%.1f,"engines":[{"addr":"http://%s:30000","worker_type":"regular","engine_rank":%d,"gpus":[[%q,0],[%q,1]],"gpu_uuids":%s}]}`+"\n",
			h0+5, sh.ip, map[string]int{"a": 0, "b": 1}[sh.id], sh.ip, sh.ip, uuids))
		node := sh.host
		if sh.id == "b" {
			node = sh.ip // this trainer names its node by IP
		}
		write(t, dir, root+"phases/"+hour+".jsonl", fmt.Sprintf(`{"name":"actor_train","t0":%.1f,"t1":%.1f,"node":%q,"rank":%d,"role":"train","gpus":[1],"step":1,"span":"00000000000000%s1"}`+"\n",
			h0+20, h0+40, node, map[string]int{"a": 1, "b": 3}[sh.id], sh.id))
	}
	return dir
}

// TestNodeIdentityJoinsLanes: engines named by IP, NVML lanes named by host name and trainers named either way
// are one set of lanes, one per GPU (docs/semconv.md §1, "Node identity"): by GPU UUID where the topology gives
// one, by the node's address (the catalog's nodes table) where it does not.
func TestNodeIdentityJoinsLanes(t *testing.T) {
	st, err := Open(nodeIdentityRun(t), false)
	if err != nil {
		t.Fatal(err)
	}
	lanes, _, err := st.Lanes("all")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, l := range lanes {
		got = append(got, fmt.Sprintf("%s uuid=%s engines=%v roles=%v ranks=%v", l.Key, l.UUID, l.Engines, l.Roles, l.Ranks))
	}
	want := []string{
		"host-a:0 uuid=GPU-a0 engines=[http://10.0.0.2:30000] roles=[rollout train] ranks=[0]",
		"host-a:1 uuid=GPU-a1 engines=[http://10.0.0.2:30000] roles=[rollout train] ranks=[1]",
		"host-b:0 uuid=GPU-b0 engines=[http://10.0.0.3:30000] roles=[rollout train] ranks=[0]",
		"host-b:1 uuid=GPU-b1 engines=[http://10.0.0.3:30000] roles=[rollout train] ranks=[1]",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("lanes:\n%s\nwant (engine lanes equal GPU lanes):\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// The phase of the trainer that named its node by IP is drawn on host-b's GPU 1.
	p := st.Phases(h0, h0+3600, lanes)
	drawn := map[string]int{}
	for i, l := range p.Lanes {
		drawn[lanes[i].Key] += len(l.T0)
	}
	if drawn["host-a:1"] != 1 || drawn["host-b:1"] != 1 {
		t.Errorf("phases per lane %v, want one on host-a:1 and one on host-b:1", drawn)
	}
	// The selection grammar reads either name of a node.
	for _, sel := range []string{"node:host-b", "node:10.0.0.3", "gpu:10.0.0.3:1"} {
		ls, _, err := st.Lanes(sel)
		if err != nil || len(ls) == 0 || ls[len(ls)-1].Key != "host-b:1" {
			t.Errorf("%s: %v (%v), want host-b's lanes", sel, ids(ls), err)
		}
	}
}
