-- An equipment-hire business's database (tests/domains/equipment_hire): customers hire equipment in
-- bookings from a start date to a return date; damage found on a hire is reported against its booking.
CREATE TABLE customers (customer_id TEXT PRIMARY KEY, full_name TEXT NOT NULL, email TEXT NOT NULL,
                        phone TEXT NOT NULL, account_type TEXT NOT NULL, tax_id TEXT);
CREATE TABLE equipment (equipment_id TEXT PRIMARY KEY, name TEXT NOT NULL, category TEXT NOT NULL,
                        daily_rate REAL NOT NULL, units_in_stock INTEGER NOT NULL);
CREATE TABLE bookings (booking_id TEXT PRIMARY KEY, customer_id TEXT NOT NULL REFERENCES customers,
                       equipment_id TEXT NOT NULL REFERENCES equipment, start_date DATE NOT NULL,
                       return_date DATE NOT NULL, quantity INTEGER NOT NULL, total REAL NOT NULL,
                       discount_percent INTEGER NOT NULL, discount_reason TEXT, status TEXT NOT NULL,
                       returned_on DATE, condition_on_return TEXT);
CREATE TABLE damage_reports (report_id TEXT PRIMARY KEY, booking_id TEXT NOT NULL REFERENCES bookings,
                             reported_on DATE NOT NULL, description TEXT NOT NULL, severity TEXT NOT NULL,
                             repair_cost REAL NOT NULL, status TEXT NOT NULL);
INSERT INTO customers VALUES ('CUS-1021', 'Ana Silva Builders', 'ana.silva@example.com', '+44 7700 952445', 'Trade', 'GB261973069');
INSERT INTO customers VALUES ('CUS-1022', 'Ben Okafor', 'ben.okafor@example.com', '+44 7700 961750', 'Personal', NULL);
INSERT INTO customers VALUES ('CUS-1023', 'Chloe Martin', 'chloe.martin@example.com', '+44 7700 995319', 'Personal', NULL);
INSERT INTO customers VALUES ('CUS-1024', 'Dev Patel Builders', 'dev.patel@example.com', '+44 7700 916328', 'Trade', 'GB177777868');
INSERT INTO customers VALUES ('CUS-1025', 'Elif Yilmaz', 'elif.yilmaz@example.com', '+44 7700 980239', 'Personal', NULL);
INSERT INTO customers VALUES ('CUS-1026', 'Femi Adeyemi', 'femi.adeyemi@example.com', '+44 7700 922337', 'Personal', NULL);
INSERT INTO customers VALUES ('CUS-1027', 'Greta Larsen Builders', 'greta.larsen@example.com', '+44 7700 957931', 'Trade', 'GB725763863');
INSERT INTO customers VALUES ('CUS-1028', 'Hugo Moreau', 'hugo.moreau@example.com', '+44 7700 917602', 'Personal', NULL);
INSERT INTO customers VALUES ('CUS-1029', 'Ines Costa', 'ines.costa@example.com', '+44 7700 976510', 'Personal', NULL);
INSERT INTO customers VALUES ('CUS-1030', 'Jonas Weber Builders', 'jonas.weber@example.com', '+44 7700 938140', 'Trade', 'GB140260662');
INSERT INTO customers VALUES ('CUS-1031', 'Kira Sato', 'kira.sato@example.com', '+44 7700 921265', 'Personal', NULL);
INSERT INTO customers VALUES ('CUS-1032', 'Liam Byrne', 'liam.byrne@example.com', '+44 7700 966838', 'Personal', NULL);
INSERT INTO customers VALUES ('CUS-1033', 'Maya Rossi Builders', 'maya.rossi@example.com', '+44 7700 964810', 'Trade', 'GB175006691');
INSERT INTO customers VALUES ('CUS-1034', 'Noah Novak', 'noah.novak@example.com', '+44 7700 941544', 'Personal', NULL);
INSERT INTO equipment VALUES ('EQ-2250', 'Scaffold tower 6m', 'Access', 45.0, 3);
INSERT INTO equipment VALUES ('EQ-2251', 'Cherry picker 12m', 'Access', 180.0, 1);
INSERT INTO equipment VALUES ('EQ-2252', 'Step ladder 3m', 'Access', 12.0, 6);
INSERT INTO equipment VALUES ('EQ-2253', 'SDS hammer drill', 'Power tools', 22.0, 5);
INSERT INTO equipment VALUES ('EQ-2254', 'Circular saw', 'Power tools', 18.0, 4);
INSERT INTO equipment VALUES ('EQ-2255', 'Tile cutter', 'Power tools', 25.0, 2);
INSERT INTO equipment VALUES ('EQ-2256', 'Petrol lawnmower', 'Garden', 30.0, 3);
INSERT INTO equipment VALUES ('EQ-2257', 'Hedge trimmer', 'Garden', 20.0, 4);
INSERT INTO equipment VALUES ('EQ-2258', 'Stump grinder', 'Garden', 95.0, 1);
INSERT INTO equipment VALUES ('EQ-2259', 'Engine hoist 1t', 'Lifting', 40.0, 2);
INSERT INTO equipment VALUES ('EQ-2260', 'Pallet truck', 'Lifting', 28.0, 3);
INSERT INTO equipment VALUES ('EQ-2261', 'Mini digger 1.5t', 'Earthmoving', 150.0, 1);
INSERT INTO equipment VALUES ('EQ-2262', 'Plate compactor', 'Earthmoving', 35.0, 2);
INSERT INTO equipment VALUES ('EQ-2263', 'Dehumidifier', 'Cleaning', 15.0, 5);
INSERT INTO equipment VALUES ('EQ-2264', 'Carpet cleaner', 'Cleaning', 24.0, 4);
INSERT INTO bookings VALUES ('BK-1001', 'CUS-1022', 'EQ-2258', '2026-06-18', '2026-06-19', 1, 95.0, 0, NULL, 'Booked', NULL, NULL);
INSERT INTO bookings VALUES ('BK-1002', 'CUS-1030', 'EQ-2250', '2026-07-27', '2026-08-06', 2, 765.0, 15, 'Long hire', 'Cancelled', NULL, NULL);
INSERT INTO bookings VALUES ('BK-1003', 'CUS-1025', 'EQ-2256', '2026-04-07', '2026-04-16', 1, 270.0, 0, NULL, 'Returned', '2026-04-16', 'Good');
INSERT INTO bookings VALUES ('BK-1004', 'CUS-1030', 'EQ-2259', '2026-08-12', '2026-08-16', 2, 320.0, 0, NULL, 'Cancelled', NULL, NULL);
INSERT INTO bookings VALUES ('BK-1005', 'CUS-1030', 'EQ-2250', '2026-08-07', '2026-08-11', 2, 360.0, 0, NULL, 'Booked', NULL, NULL);
INSERT INTO bookings VALUES ('BK-1006', 'CUS-1026', 'EQ-2257', '2026-07-29', '2026-08-06', 3, 480.0, 0, NULL, 'Booked', NULL, NULL);
INSERT INTO bookings VALUES ('BK-1007', 'CUS-1032', 'EQ-2262', '2026-05-03', '2026-05-05', 2, 140.0, 0, NULL, 'Returned', '2026-05-06', 'Good');
INSERT INTO bookings VALUES ('BK-1008', 'CUS-1030', 'EQ-2251', '2026-04-01', '2026-04-10', 1, 1620.0, 0, NULL, 'Returned', '2026-04-11', 'Needs cleaning');
INSERT INTO bookings VALUES ('BK-1009', 'CUS-1021', 'EQ-2260', '2026-03-21', '2026-04-03', 3, 1092.0, 0, NULL, 'Returned', '2026-04-03', 'Good');
INSERT INTO bookings VALUES ('BK-1010', 'CUS-1032', 'EQ-2255', '2026-08-01', '2026-08-09', 2, 320.0, 20, 'Goodwill', 'Cancelled', NULL, NULL);
INSERT INTO bookings VALUES ('BK-1011', 'CUS-1028', 'EQ-2261', '2026-08-19', '2026-08-21', 1, 300.0, 0, NULL, 'Booked', NULL, NULL);
INSERT INTO bookings VALUES ('BK-1012', 'CUS-1030', 'EQ-2260', '2026-06-24', '2026-06-29', 3, 420.0, 0, NULL, 'Booked', NULL, NULL);
INSERT INTO bookings VALUES ('BK-1013', 'CUS-1021', 'EQ-2257', '2026-05-31', '2026-06-03', 1, 48.0, 20, 'Goodwill', 'On hire', NULL, NULL);
INSERT INTO bookings VALUES ('BK-1014', 'CUS-1023', 'EQ-2261', '2026-05-04', '2026-05-11', 1, 1050.0, 0, NULL, 'Returned', '2026-05-11', 'Needs cleaning');
INSERT INTO bookings VALUES ('BK-1015', 'CUS-1027', 'EQ-2258', '2026-05-12', '2026-05-15', 1, 256.5, 10, 'Long hire', 'Returned', '2026-05-15', 'Needs cleaning');
INSERT INTO bookings VALUES ('BK-1016', 'CUS-1024', 'EQ-2252', '2026-03-23', '2026-03-26', 2, 64.8, 10, 'Long hire', 'Returned', '2026-03-25', 'Good');
INSERT INTO bookings VALUES ('BK-1017', 'CUS-1025', 'EQ-2254', '2026-03-03', '2026-03-06', 4, 216.0, 0, NULL, 'Returned', '2026-03-06', 'Good');
INSERT INTO bookings VALUES ('BK-1018', 'CUS-1032', 'EQ-2263', '2026-07-11', '2026-07-21', 1, 150.0, 0, NULL, 'Booked', NULL, NULL);
INSERT INTO bookings VALUES ('BK-1019', 'CUS-1034', 'EQ-2260', '2026-07-23', '2026-07-30', 2, 352.8, 10, 'Long hire', 'Booked', NULL, NULL);
INSERT INTO bookings VALUES ('BK-1020', 'CUS-1021', 'EQ-2253', '2026-03-19', '2026-03-23', 4, 352.0, 0, NULL, 'Returned', '2026-03-23', 'Good');
INSERT INTO bookings VALUES ('BK-1021', 'CUS-1021', 'EQ-2259', '2026-04-09', '2026-04-18', 1, 360.0, 0, NULL, 'Returned', '2026-04-18', 'Good');
INSERT INTO bookings VALUES ('BK-1022', 'CUS-1030', 'EQ-2256', '2026-04-09', '2026-04-20', 2, 660.0, 0, NULL, 'Returned', '2026-04-21', 'Good');
INSERT INTO bookings VALUES ('BK-1023', 'CUS-1022', 'EQ-2263', '2026-07-04', '2026-07-12', 4, 432.0, 10, 'Loyalty', 'Booked', NULL, NULL);
INSERT INTO bookings VALUES ('BK-1024', 'CUS-1032', 'EQ-2255', '2026-09-07', '2026-09-12', 2, 225.0, 10, 'Loyalty', 'Booked', NULL, NULL);
INSERT INTO bookings VALUES ('BK-1025', 'CUS-1024', 'EQ-2258', '2026-06-02', '2026-06-05', 1, 256.5, 10, 'Loyalty', 'Booked', NULL, NULL);
INSERT INTO bookings VALUES ('BK-1026', 'CUS-1032', 'EQ-2263', '2026-05-07', '2026-05-16', 3, 405.0, 0, NULL, 'Returned', '2026-05-16', 'Damaged');
INSERT INTO bookings VALUES ('BK-1027', 'CUS-1029', 'EQ-2262', '2026-07-08', '2026-07-14', 1, 210.0, 0, NULL, 'Booked', NULL, NULL);
INSERT INTO bookings VALUES ('BK-1028', 'CUS-1033', 'EQ-2263', '2026-04-20', '2026-05-03', 2, 390.0, 0, NULL, 'Returned', '2026-05-03', 'Good');
INSERT INTO bookings VALUES ('BK-1029', 'CUS-1029', 'EQ-2257', '2026-06-01', '2026-06-13', 1, 240.0, 0, NULL, 'Booked', NULL, NULL);
INSERT INTO bookings VALUES ('BK-1030', 'CUS-1028', 'EQ-2254', '2026-04-20', '2026-05-02', 3, 648.0, 0, NULL, 'Returned', '2026-05-02', 'Good');
INSERT INTO damage_reports VALUES ('DR-3001', 'BK-1007', '2026-05-06', 'Hydraulic hose split and leaking oil', 'Major', 650.0, 'Repaired');
INSERT INTO damage_reports VALUES ('DR-3002', 'BK-1009', '2026-04-04', 'Bent outrigger clip', 'Minor', 80.0, 'Open');
INSERT INTO damage_reports VALUES ('DR-3003', 'BK-1030', '2026-05-04', 'Hydraulic hose split and leaking oil', 'Major', 410.0, 'Open');
INSERT INTO damage_reports VALUES ('DR-3004', 'BK-1028', '2026-05-05', 'Motor burnt out after overloading', 'Major', 410.0, 'Open');
INSERT INTO damage_reports VALUES ('DR-3005', 'BK-1016', '2026-03-25', 'Bent outrigger clip', 'Minor', 35.0, 'Repaired');
INSERT INTO damage_reports VALUES ('DR-3006', 'BK-1022', '2026-04-22', 'Bent outrigger clip', 'Minor', 80.0, 'Repaired');
INSERT INTO damage_reports VALUES ('DR-3007', 'BK-1014', '2026-05-11', 'Scratched paintwork on the guard rail', 'Minor', 80.0, 'Open');
INSERT INTO damage_reports VALUES ('DR-3008', 'BK-1020', '2026-03-23', 'Cracked plastic cover on the handle', 'Minor', 80.0, 'Open');
