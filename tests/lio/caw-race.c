/*
 * caw-race: two initiators race COMPARE AND WRITE on one block through two iSCSI URLs (two
 * targets exporting the same volume) for many rounds. In every round both compare against the
 * block's current value and write their own; exactly one must succeed, the other must get
 * MISCOMPARE, and reading the block back (through the other URL) must give the winner's data.
 *
 *   caw-race URL1 URL2 ROUNDS [LBA]      exit 0: every round had exactly one winner
 *
 * Build: gcc -O2 -o caw-race caw-race.c -liscsi -lpthread   (Debian: libiscsi-dev)
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <iscsi/iscsi.h>
#include <iscsi/scsi-lowlevel.h>

#define BS 512

struct side {
	int id;
	const char *url;
	struct iscsi_context *iscsi;
	int lun;
	int result; /* 1 won, 0 miscompare, -1 other error */
};

static pthread_barrier_t start, done;
static unsigned char expected[BS];
static uint64_t lba;
static int round_no;

static void pattern(unsigned char *b, int round, int id)
{
	char s[64];
	int n = snprintf(s, sizeof(s), "round %d initiator %d | ", round, id);
	for (int i = 0; i < BS; i++)
		b[i] = (unsigned char)s[i % n];
}

static struct iscsi_context *connect_url(const char *s, const char *initiator, int *lun)
{
	struct iscsi_context *iscsi = iscsi_create_context(initiator);
	struct iscsi_url *url;
	if (!iscsi) {
		fprintf(stderr, "caw-race: cannot create iSCSI context\n");
		exit(2);
	}
	url = iscsi_parse_full_url(iscsi, s);
	if (!url) {
		fprintf(stderr, "caw-race: bad URL %s: %s\n", s, iscsi_get_error(iscsi));
		exit(2);
	}
	iscsi_set_targetname(iscsi, url->target);
	iscsi_set_session_type(iscsi, ISCSI_SESSION_NORMAL);
	iscsi_set_header_digest(iscsi, ISCSI_HEADER_DIGEST_NONE_CRC32C);
	if (url->user[0])
		iscsi_set_initiator_username_pwd(iscsi, url->user, url->passwd);
	if (iscsi_full_connect_sync(iscsi, url->portal, url->lun) != 0) {
		fprintf(stderr, "caw-race: login to %s failed: %s\n", s, iscsi_get_error(iscsi));
		exit(2);
	}
	*lun = url->lun;
	iscsi_destroy_url(url);
	return iscsi;
}

static void *racer(void *arg)
{
	struct side *sd = arg;
	unsigned char buf[2 * BS];
	for (;;) {
		pthread_barrier_wait(&start);
		if (round_no < 0)
			return NULL;
		memcpy(buf, expected, BS);
		pattern(buf + BS, round_no, sd->id);
		struct scsi_task *t = iscsi_compareandwrite_sync(sd->iscsi, sd->lun, lba, buf, 2 * BS, BS,
								 0, 0, 0, 0, 0);
		if (t && t->status == SCSI_STATUS_GOOD)
			sd->result = 1;
		else if (t && t->status == SCSI_STATUS_CHECK_CONDITION && t->sense.key == SCSI_SENSE_MISCOMPARE)
			sd->result = 0;
		else {
			fprintf(stderr, "caw-race: round %d initiator %d: %s\n", round_no, sd->id,
				t ? iscsi_get_error(sd->iscsi) : "no task");
			sd->result = -1;
		}
		if (t)
			scsi_free_scsi_task(t);
		pthread_barrier_wait(&done);
	}
}

int main(int argc, char **argv)
{
	if (argc < 4) {
		fprintf(stderr, "usage: caw-race URL1 URL2 ROUNDS [LBA]\n");
		return 2;
	}
	int rounds = atoi(argv[3]);
	lba = argc > 4 ? strtoull(argv[4], NULL, 0) : 1000;
	struct side s[2] = {
		{.id = 1, .url = argv[1]}, {.id = 2, .url = argv[2]},
	};
	s[0].iscsi = connect_url(s[0].url, "iqn.2007-10.com.github:sahlberg:libiscsi:iscsi-test", &s[0].lun);
	s[1].iscsi = connect_url(s[1].url, "iqn.2007-10.com.github:sahlberg:libiscsi:iscsi-test-2", &s[1].lun);
	/* start from a known value */
	pattern(expected, 0, 0);
	struct scsi_task *t = iscsi_write16_sync(s[0].iscsi, s[0].lun, lba, expected, BS, BS, 0, 0, 0, 0, 0);
	if (!t || t->status != SCSI_STATUS_GOOD) {
		fprintf(stderr, "caw-race: initial write failed: %s\n", iscsi_get_error(s[0].iscsi));
		return 1;
	}
	scsi_free_scsi_task(t);
	pthread_barrier_init(&start, NULL, 3);
	pthread_barrier_init(&done, NULL, 3);
	pthread_t th[2];
	for (int i = 0; i < 2; i++)
		pthread_create(&th[i], NULL, racer, &s[i]);
	int wins[3] = {0, 0, 0}, bad = 0;
	for (round_no = 1; round_no <= rounds; round_no++) {
		pthread_barrier_wait(&start);
		pthread_barrier_wait(&done);
		int winners = (s[0].result == 1) + (s[1].result == 1);
		int losers = (s[0].result == 0) + (s[1].result == 0);
		if (winners != 1 || losers != 1) {
			fprintf(stderr, "caw-race: round %d: results %d/%d (want one win, one miscompare)\n",
				round_no, s[0].result, s[1].result);
			bad++;
			break;
		}
		int w = s[0].result == 1 ? 1 : 2;
		wins[w]++;
		pattern(expected, round_no, w);
		/* read back through the loser's target: the winner's data must be there */
		struct side *other = w == 1 ? &s[1] : &s[0];
		t = iscsi_read16_sync(other->iscsi, other->lun, lba, BS, BS, 0, 0, 0, 0, 0);
		if (!t || t->status != SCSI_STATUS_GOOD || t->datain.size != BS ||
		    memcmp(t->datain.data, expected, BS) != 0) {
			fprintf(stderr, "caw-race: round %d: block does not hold the winner's (initiator %d) data\n",
				round_no, w);
			bad++;
			break;
		}
		scsi_free_scsi_task(t);
	}
	round_no = -1;
	pthread_barrier_wait(&start);
	for (int i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
	printf("caw-race: %d rounds, initiator 1 won %d, initiator 2 won %d, violations %d\n",
	       rounds, wins[1], wins[2], bad);
	return bad ? 1 : 0;
}
